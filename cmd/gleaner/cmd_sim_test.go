package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C (SIGINT) or SIGTERM stops `gleaner sim` within a second, in the
// middle of the market: it says where it was, writes nothing and exits
// 130.
func TestSimStopsOnSIGINTAndSIGTERM(t *testing.T) {
	traces := tracesFor(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		out := filepath.Join(t.TempDir(), "out")
		cmd := exec.Command(binPath, "sim", "--providers", "300", "--days", "7", "--baselines", "central-online",
			"--traces", traces, "--out", out)
		seen := startWatching(t, cmd, "market: day")
		seen.waitReached(t, 60*time.Second, sig.String()+": the market started")
		time.Sleep(200 * time.Millisecond)
		sent := time.Now()
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { <-seen.done; exited <- cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-time.After(5 * time.Second):
			t.Fatalf("%v: still running 5 s after the signal:\n%s", sig, seen.String())
		}
		if took := time.Since(sent); took > time.Second {
			t.Errorf("%v: stopped %v after the signal, want within a second", sig, took)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Errorf("%v: %v, want exit code %d", sig, err, exitInterrupted)
		}
		if s := seen.String(); !strings.Contains(s, "gleaner: interrupted (") || !strings.Contains(s, "during the market, day") ||
			!strings.Contains(s, "nothing written") || strings.Contains(s, "goroutine") {
			t.Errorf("%v: stderr:\n%s", sig, s)
		}
		if _, err := os.Stat(filepath.Join(out, "report.json")); !os.IsNotExist(err) {
			t.Errorf("%v: report.json written after the interruption (%v)", sig, err)
		}
	}
}

// --renters deals a demand CSV without a renter column (a converted
// trace) over that many renters, and the configuration shown is what
// ran; a CSV with a renter column keeps its renters, and the CLI says
// --renters is not used. Goals with nothing to test say so.
func TestSimDemandHonoursRenters(t *testing.T) {
	traces := tracesFor(t)
	conv := filepath.Join(t.TempDir(), "serving.csv")
	mustOK(t, gleaner(t, "sim", "convert", "--from", "alibaba-v2025", "--max-jobs", "40", "--traces", traces, "--out", conv), "convert")
	b, _ := os.ReadFile(conv)
	if header, _, _ := strings.Cut(string(b), "\n"); strings.Contains(header, "renter") {
		t.Errorf("converted header %q: the trace does not say who submitted its jobs", header)
	}
	out := t.TempDir()
	r := gleaner(t, "sim", "--demand", conv, "--renters", "7", "--providers", "20", "--days", "0.25", "--baselines", "central-online",
		"--traces", traces, "--out", out, "--json")
	mustOK(t, r, "sim --demand --renters")
	var j struct {
		Report struct {
			Config map[string]any `json:"config"`
			Demand struct {
				Renters int `json:"renters"`
			} `json:"demand"`
			Goals []struct {
				Name, Strategy, Status, Why string
				Met                         bool
			} `json:"goals"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatal(err)
	}
	demand, _ := j.Report.Config["demand"].(map[string]any)
	if j.Report.Demand.Renters != 7 || demand["renters"] != 7.0 || demand["renters_from"] != "dealt" {
		t.Errorf("%d renters submitted jobs, config demand %v; want 7, dealt", j.Report.Demand.Renters, demand)
	}
	for _, unused := range []string{"demand_trace"} {
		if _, ok := j.Report.Config[unused]; ok {
			t.Errorf("config shows %s, which a --demand run does not use", unused)
		}
	}
	if _, ok := demand["load"]; ok {
		t.Error("config shows demand.load, which a --demand run does not use")
	}
	for _, g := range j.Report.Goals {
		// The 2025 trace is all silver serving: no gold, no bronze.
		if g.Strategy == "market" && (g.Name == "gold-honoured" || g.Name == "preemption-loss" || g.Name == "bronze-cost") &&
			(g.Met || g.Status != "not tested" || g.Why == "") {
			t.Errorf("%s with nothing to test: %+v", g.Name, g)
		}
	}

	// The text: goals not tested, the strategies, JCT over all jobs.
	r = gleaner(t, "sim", "--demand", conv, "--renters", "7", "--providers", "20", "--days", "0.25", "--baselines", "central-online",
		"--traces", traces, "--out", t.TempDir())
	mustOK(t, r, "sim --demand text")
	for _, want := range []string{"not tested  >= 99.9% of gold reservations", "There were no gold reservations",
		"STRATEGIES", "knows: Everything, at once", "ALL: P50", "MEAN", "MAX PRICES", "credits/GPU-h", "dealt in turn"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}

	// The run's own demand.csv names each job's renter: --renters is not used.
	r = gleaner(t, "sim", "--demand", filepath.Join(out, "demand.csv"), "--renters", "3", "--providers", "20", "--days", "0.25",
		"--baselines", "central-online", "--traces", traces, "--out", t.TempDir())
	mustOK(t, r, "sim --demand with renters")
	if !strings.Contains(r.stderr, "note: --renters is not used") || !strings.Contains(r.stdout, "the renter column of") {
		t.Errorf("--renters beside a renter column:\nstderr %s\nstdout %s", r.stderr, r.stdout)
	}
}

// Bad rows fail before the run, each named by file:line.
func TestSimBadRowsFailBeforeTheRun(t *testing.T) {
	traces := tracesFor(t)
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("submit_s,duration_s,gpus,gpu_models,tier,max_price,region,kind\n"+
		"10,600,1,,silver,,,batch\n"+
		"10,3456000,1,,silver,,,batch\n"+
		"10,600,1,H800|H800-80GB,silver,,,batch\n"), 0o644)
	r := gleaner(t, "sim", "--demand", bad, "--providers", "20", "--days", "0.25", "--traces", traces, "--out", t.TempDir())
	if r.code != 1 || strings.Contains(r.stderr, "market: day") || strings.Contains(r.stderr, "goroutine") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"bad.csv:3: job j000001: duration_s 3456000", `bad.csv:4: job j000002: gpu_models "H800|H800-80GB" names H800-80GB twice`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
