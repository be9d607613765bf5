package testnet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
)

// natShortCircuit is the relay's per-circuit duration in
// TestNATLongJobBothSymmetric: an hour in production, a few seconds
// here, so that a job of natLongJob outlives several circuits.
const (
	natShortCircuit = 10 // seconds
	natLongJob      = 3 * natShortCircuit * time.Second
)

// Issue 37: a renter and a provider both behind symmetric NATs share
// nothing but the relay, whose circuits each live a bounded time (an
// hour by default; natShortCircuit seconds here). A job that runs
// longer than a circuit loses its stream whenever the relay resets the
// circuit under it; the renter dials the provider through the relay
// again, re-attaches, and the job completes with all its logs.
func TestNATLongJobBothSymmetric(t *testing.T) {
	waitsApart(t)
	requireNATNet(t)
	requireDocker(t)
	hs := startHomesWith(t, homesOpts{relays: 1, symRenter: true, circuitS: natShortCircuit})
	waitSettled(t, hs)
	setHomeOffer(t, hs.symProv)
	waitFor(t, 30*time.Second, "the symmetric renter has the offer", hs.all, func() bool { return hs.symRenter.book(t)[hs.symProv.peerID] })

	lines := int(natLongJob / time.Second)
	spec := natJobSpec("both-symmetric", symGPU, "-sleep", natLongJob.String(), "-lines", fmt.Sprint(lines))
	var j renting.JobRecord
	start := time.Now()
	if err := hs.symRenter.call("job_submit", node.JobSubmitParams{Spec: spec}, &j); err != nil {
		t.Fatal(err)
	}
	// Follow the job as awaitJob does, keeping the notes the renter
	// writes when it loses the provider, and whether every connection
	// between the two was relayed whenever they had one.
	var notes []string
	var direct []string
	for deadline := time.Now().Add(natJobBound + natLongJob); ; {
		if err := hs.symRenter.call("job_status", node.JobIDParams{ID: j.ID}, &j); err != nil {
			t.Fatal(err)
		}
		if j.Error != "" && (len(notes) == 0 || notes[len(notes)-1] != j.Error) {
			notes = append(notes, j.Error)
		}
		for _, a := range hs.symRenter.connsTo(t, hs.symProv.peerID) {
			if !strings.Contains(a, "/p2p-circuit") {
				direct = append(direct, a)
			}
		}
		if ended(j.State) || j.State == renting.StateCancelled {
			break
		}
		if time.Now().After(deadline) {
			dumpLogs(t, hs.all)
			t.Fatalf("job %s is %s after %v (error %q)", j.ID, j.State, time.Since(start), j.Error)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the job ended %s after %v; notes on the way: %q", j.State, time.Since(start).Round(time.Millisecond), notes)
	if j.State != renting.StateCompleted || j.Provider != hs.symProv.peerID {
		dumpLogs(t, hs.all)
		t.Fatalf("job ended %s at %s: %s", j.State, j.Provider, j.Error)
	}
	if len(direct) > 0 {
		t.Errorf("the renter and the provider, both behind symmetric NATs, had direct connections: %v", direct)
	}
	lostOnce := false
	for _, n := range notes {
		lostOnce = lostOnce || strings.Contains(n, "provider lost")
	}
	if !lostOnce {
		t.Errorf("the job never lost its stream, so it did not outlive a %d s circuit: notes %q", natShortCircuit, notes)
	}
	var logs node.JobLogsResult
	if err := hs.symRenter.call("job_logs", node.JobIDParams{ID: j.ID}, &logs); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= lines; i++ {
		if want := fmt.Sprintf("step %d/%d done", i, lines); !strings.Contains(logs.Logs, want) {
			t.Errorf("the renter's logs lack %q:\n%s", want, logs.Logs)
		}
	}
	if !strings.Contains(logs.Logs, "job finished") {
		t.Errorf("the renter's logs lack the job's end:\n%s", logs.Logs)
	}
}
