package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet"
)

// TestJobRunOnGPUsHandedOver runs, on the real binary and a provider of
// two simulated GPUs that a bronze job holds, a silver job that preempts
// it, writes outputs and exits 3. `job run` says the job waits for the
// GPUs being handed over (not that a reservation "starts" now), prints
// the outputs' CID with the command that fetches them, and exits 3, the
// job's own code; `job status` prints the outputs too.
func TestJobRunOnGPUsHandedOver(t *testing.T) {
	requireDocker(t)
	p := provider(t, "provider", "2xRTX4090")
	rn := startRenter(t, p)
	all := []*rnode{p, rn}
	filler := rn.submit(t, fmt.Sprintf("name: filler\nimage: %s\ncommand: [\"-sleep\", \"5m\", \"-lines\", \"2\"]\nresources: {gpus: 2}\n"+
		"tier: bronze\nmax_price: 1.00\nduration: {expected: 10m, max: 20m}\nallow_simulated: true\n", testnet.DemoImage), p.d.peerID)
	rn.waitJob(t, filler, time.Minute, "the bronze job running", func(j renting.JobRecord) bool { return j.State == renting.StateRunning }, all...)

	spec := fmt.Sprintf("name: urgent\nimage: %s\ncommand: [\"-write\", \"/outputs\", \"-lines\", \"1\", \"-exit\", \"3\"]\nresources: {gpus: 2}\n"+
		"tier: silver\nmax_price: 1.00\nduration: {expected: 1m, max: 10m}\nallow_simulated: true\nretry: {max_reauctions: 0}\n"+
		"outputs: {path: /outputs, max_size: 16MiB}\n", testnet.DemoImage)
	file := filepath.Join(t.TempDir(), "urgent.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	r := rn.cli(t, "job", "run", "--provider", p.d.peerID, file)
	if r.code != 3 {
		t.Errorf("job run of a job that exits 3: exit %d, want 3\nstderr:\n%s\n%s", r.code, r.stderr, tails(all))
	}
	if !strings.Contains(r.stderr, "waiting for GPUs being handed over") {
		t.Errorf("job run does not say the job waits for the GPUs being handed over:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "reserved: starts") {
		t.Errorf("job run says a silver job's reservation starts:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "job finished") && !strings.Contains(r.stdout, "job finished") {
		t.Errorf("the job's output is missing:\nstdout:\n%s", r.stdout)
	}
	var id, cid string
	for _, line := range strings.Split(r.stderr, "\n") {
		if v, ok := strings.CutPrefix(line, "job:       "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "outputs:   "); ok {
			cid, _, _ = strings.Cut(v, " ")
		}
	}
	if id == "" || !strings.HasPrefix(cid, "bafy") || !strings.Contains(r.stderr, "gleaner job fetch "+id+" ") {
		t.Fatalf("job run prints no outputs line with the CID and how to fetch it (job %q, outputs %q):\n%s", id, cid, r.stderr)
	}
	st := rn.cli(t, "job", "status", id)
	mustOK(t, st, "job status")
	if !strings.Contains(st.stdout, "outputs:   "+cid+" (get them: gleaner job fetch "+id+" <new-dir>)") {
		t.Errorf("job status does not print the outputs:\n%s", st.stdout)
	}
	if !strings.Contains(st.stdout, "exit code: 3") {
		t.Errorf("job status:\n%s", st.stdout)
	}
}

// job run's exit status for each way a job ends: the job's own code when
// its container ran and exited non-zero, 1 for every other failure.
func TestJobRunExitCodes(t *testing.T) {
	code := func(n int) *int { return &n }
	cases := []struct {
		name string
		j    renting.JobRecord
		want int
	}{
		{"completed", renting.JobRecord{State: renting.StateCompleted, ExitCode: code(0)}, exitOK},
		{"exited 3", renting.JobRecord{State: renting.StateFailed, ExitCode: code(3), Error: "the job exited with code 3"}, 3},
		{"killed", renting.JobRecord{State: renting.StateFailed, ExitCode: code(137)}, 137},
		{"failed without running", renting.JobRecord{State: renting.StateFailed, Error: "provider: the image could not be pulled"}, exitFailure},
		{"stopped unpaid, exit 0", renting.JobRecord{State: renting.StateFailed, ExitCode: code(0)}, exitFailure},
		{"no match", renting.JobRecord{State: renting.StateNoMatch}, exitFailure},
		{"cancelled", renting.JobRecord{State: renting.StateCancelled, ExitCode: code(143)}, exitFailure},
		{"verification failed", renting.JobRecord{State: renting.StateCompleted, ExitCode: code(0), Verified: "failed"}, exitFailure},
	}
	for _, c := range cases {
		c.j.ID = "j"
		if got := report(&strings.Builder{}, runResult(c.j)); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
	// Wrapped, the job's code still decides.
	if got := classify(fmt.Errorf("replica: %w", runResult(renting.JobRecord{State: renting.StateFailed, ExitCode: code(42)}))).Code; got != 42 {
		t.Errorf("a wrapped job exit: %d", got)
	}
	var je *jobExitError
	if err := runResult(renting.JobRecord{State: renting.StateFailed, ExitCode: code(3)}); !errors.As(err, &je) || je.ExitCode() != 3 {
		t.Errorf("a job that exited 3: %v", err)
	}
}

// A reservation waiting for its window says when it starts; a job whose
// start has come waits for GPUs being handed over, and says so.
func TestReservedSaysWhatTheJobWaitsFor(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	ahead := renting.JobEvent{Type: "state", State: renting.StateReserved, Note: "starts " + now.Add(2*time.Hour).Format(time.RFC3339), Time: now}
	if got := progressLine(ahead); !strings.Contains(got, "reserved: starts ") || !strings.Contains(got, "(in 2h0m0s)") {
		t.Errorf("a gold reservation 2 h ahead: %q", got)
	}
	handover := renting.JobEvent{Type: "state", State: renting.StateReserved, Note: "starts " + now.Add(-time.Second).Format(time.RFC3339), Time: now}
	if got := progressLine(handover); strings.Contains(got, "starts") || !strings.Contains(got, "handed over") {
		t.Errorf("a job whose start has come: %q", got)
	}
	if got := progressLine(renting.JobEvent{Type: "state", State: renting.StateRunning, Time: now}); !strings.HasSuffix(got, "] running") {
		t.Errorf("running: %q", got)
	}

	var b strings.Builder
	printJob(&b, renting.JobRecord{ID: "j", State: renting.StateReserved})
	if out := b.String(); !strings.Contains(out, "state:     reserved (waiting for GPUs being handed over") || strings.Contains(out, "reserved:  ") {
		t.Errorf("job status of a silver job waiting for GPUs:\n%s", out)
	}
	past := time.Now().Add(-time.Minute)
	b.Reset()
	printJob(&b, renting.JobRecord{ID: "j", State: renting.StateReserved, Reserved: &past})
	if out := b.String(); !strings.Contains(out, "(its window has begun)") || !strings.Contains(out, "handed over") {
		t.Errorf("job status of a reservation whose window began, still waiting:\n%s", out)
	}
}

func TestPrintJobShowsItsOutputs(t *testing.T) {
	var b strings.Builder
	printJob(&b, renting.JobRecord{ID: "train-1", State: renting.StateCompleted, Outputs: "bafybeiexample"})
	if want := "outputs:   bafybeiexample (get them: gleaner job fetch train-1 <new-dir>)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("job status:\n%s\nwant the line %q", b.String(), want)
	}
	b.Reset()
	printJob(&b, renting.JobRecord{ID: "train-1", State: renting.StateCompleted})
	if strings.Contains(b.String(), "outputs:") {
		t.Errorf("a job without outputs:\n%s", b.String())
	}
}
