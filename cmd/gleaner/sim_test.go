package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"

	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/testnet/sim"
)

// tracesFor is a directory holding the built-in traces, for a CLI test
// that passes --traces explicitly.
func tracesFor(t *testing.T) string {
	dir, err := sim.TraceDir("")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// A new user's run: a small simulation from the CLI writes its files,
// says what it is doing, and gives the same report twice; --json is the
// report; a config file is read and a flag overrides it.
func TestSimFromTheCLI(t *testing.T) {
	traces := tracesFor(t)
	out := t.TempDir()
	args := []string{"sim", "--providers", "20", "--renters", "10", "--days", "0.5", "--traces", traces, "--out", out}
	r := gleaner(t, args...)
	mustOK(t, r, "gleaner sim")
	for _, want := range []string{"SIMULATED market", "central-online", "upper bound", "GOALS"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "market: day") {
		t.Errorf("no progress on stderr:\n%s", r.stderr)
	}
	first, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.html", "timing.json", "supply.csv", "demand.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// The demand it wrote, fed back in with the supply, is the same run.
	again := t.TempDir()
	mustOK(t, gleaner(t, "sim", "--supply", filepath.Join(out, "supply.csv"), "--demand", filepath.Join(out, "demand.csv"),
		"--renters", "10", "--days", "0.5", "--traces", traces, "--out", again), "gleaner sim --supply --demand")
	second, _ := os.ReadFile(filepath.Join(again, "report.json"))
	var a, b map[string]any
	if json.Unmarshal(first, &a) != nil || json.Unmarshal(second, &b) != nil {
		t.Fatal("report.json is not JSON")
	}
	if !bytes.Equal(mustJSON(t, a["strategies"]), mustJSON(t, b["strategies"])) {
		t.Error("feeding supply.csv and demand.csv back in gave other results")
	}

	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	os.WriteFile(cfg, []byte("seed: 3\ndays: 0.25\nbaselines: [central-online]\nsupply:\n  providers: 15\ndemand:\n  renters: 5\nmarket:\n  billing: 5m\n"), 0o644)
	r = gleaner(t, "sim", "--config", cfg, "--seed", "4", "--traces", traces, "--out", t.TempDir(), "--json")
	mustOK(t, r, "gleaner sim --config --json")
	var j struct {
		Report struct {
			Seed       uint64 `json:"seed"`
			Strategies []struct {
				Name string `json:"name"`
			} `json:"strategies"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if j.Report.Seed != 4 || len(j.Report.Strategies) != 2 {
		t.Errorf("config and flag: seed %d, %d strategies; want seed 4 (the flag), market and central-online", j.Report.Seed, len(j.Report.Strategies))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Bad input is a one-line error naming what is wrong, never a stack trace.
func TestSimBadInput(t *testing.T) {
	traces := tracesFor(t)
	bad := filepath.Join(t.TempDir(), "demand.csv")
	os.WriteFile(bad, []byte("submit_s,duration_s,gpus,gpu_models,tier,max_price,region,kind\n10,600,x,,silver,1,,batch\n"), 0o644)
	unknown := filepath.Join(t.TempDir(), "demand.csv")
	os.WriteFile(unknown, []byte("submit_s,duration_s,gpus,gpu_models,tier,max_price,region,kind\n10,600,1,B200,silver,1,,batch\n"), 0o644)
	goldGang := filepath.Join(t.TempDir(), "demand.csv")
	os.WriteFile(goldGang, []byte("submit_s,duration_s,gpus,gpu_models,tier,max_price,region,kind,id,renter,start_s,members\n10,600,1,,gold,1,,batch,g,0,900,2\n"), 0o644)
	badCfg := filepath.Join(t.TempDir(), "sim.yaml")
	os.WriteFile(badCfg, []byte("sed: 3\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--providers", "0"}, 2, "--providers 0"},
		{[]string{"--adversaries", "lazy=0.1"}, 2, `unknown behaviour "lazy"`},
		{[]string{"--baselines", "oracle"}, 2, `unknown baseline "oracle"`},
		{[]string{"--demand", bad}, 1, "demand.csv:2:3: gpus"},
		{[]string{"--demand", unknown, "--providers", "5"}, 1, "no provider has model B200"},
		{[]string{"--config", badCfg}, 2, "field sed not found"},
		{[]string{"--gang-width", "9"}, 2, "--gang-width 9: use 0 (no gangs) to 8"},
		{[]string{"--demand", goldGang}, 1, `demand.csv:2:12: members: "2": a gang is silver or bronze`},
		{[]string{"--array-split", "1"}, 2, "--array-split 1: use 0 (no arrays) or 2 to 64"},
		{[]string{"--array-split", "4", "--array-parallel", "5"}, 2, "--array-parallel 5: use 0 (every shard at once) to --array-split"},
	} {
		args := append([]string{"sim", "--traces", traces, "--out", t.TempDir()}, c.args...)
		r := gleaner(t, args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// `gleaner sim convert` writes a trace as the canonical demand CSV, which
// `gleaner sim --demand` reads back; an unknown trace is a usage error.
func TestSimConvertFromTheCLI(t *testing.T) {
	traces := tracesFor(t)
	out := filepath.Join(t.TempDir(), "serving.csv")
	r := gleaner(t, "sim", "convert", "--from", "alibaba-v2025", "--max-jobs", "40", "--traces", traces, "--out", out)
	mustOK(t, r, "gleaner sim convert")
	if !strings.Contains(r.stdout, "wrote 40 jobs") {
		t.Errorf("stdout: %s", r.stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 41 {
		t.Errorf("%d lines, want a header and 40 jobs", lines)
	}
	mustOK(t, gleaner(t, "sim", "--demand", out, "--providers", "20", "--days", "0.25", "--baselines", "central-online",
		"--traces", traces, "--out", t.TempDir()), "gleaner sim --demand <converted>")
	if r := gleaner(t, "sim", "convert", "--from", "borg", "--out", out); r.code != 2 || !strings.Contains(r.stderr, `"borg"`) {
		t.Errorf("unknown trace: exit %d, %q", r.code, r.stderr)
	}
}
