package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// A job whose process is found on a GPU its lease did not give it (its
// container escaped its device restriction) is killed at once, without
// the lease's notice: the demo job would stop cleanly on SIGTERM, so an
// exit by SIGKILL (137) shows no SIGTERM came first.
func TestAJobThatEscapedItsGPUsIsKilledAtOnce(t *testing.T) {
	r := newHostileRig(t, Options{}, nil)
	spec := hostileSpec("escapee", "60s")
	s := r.start(r.lease("escapee", spec), spec)
	if ev := nextEvent(t, s, "status"); ev.Type != "status" {
		t.Fatalf("the start: %+v", ev)
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	inv, err := r.prov.GPUSource().Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	av := attest.Availability{Inventory: inv, Escaped: []attest.Escape{{Job: "escapee", PID: 4242, GPU: 0, GPUUUID: inv.GPUs[0].UUID}}}
	for _, g := range inv.GPUs {
		av.Available = append(av.Available, g.Index)
	}
	// Wait until the container runs before the escape is found.
	waitFor(t, 30*time.Second, "the escapee's container running", func() bool {
		return strings.Contains(strings.Join(containers(t, "escapee"), " "), "running")
	})
	began := time.Now()
	r.prov.providerJobs.SetAvailability(av)
	ev := nextEvent(t, s, "exit")
	if ev.Type != "exit" || ev.Status != "preempted" || !strings.Contains(ev.Error, sched.ReasonEscaped) {
		t.Fatalf("the escaped job's end: %+v", ev)
	}
	if ev.ExitCode != 137 {
		t.Fatalf("exit code %d after %v: want 137, killed without a SIGTERM first", ev.ExitCode, time.Since(began))
	}
}
