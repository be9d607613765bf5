package node

import (
	"context"
	"strings"
	"testing"
	"time"

	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/wire"
)

// TestAStoppingProviderPreemptsItsJobsAndTellsTheRenter: a provider whose
// daemon is stopped cleanly gives its running job the lease's notice, and
// its renter hears why in the exit event (preempted, "the provider's
// daemon is stopping"), so that it auctions the job again; the lease is
// settled once and recorded ended, and the stopping provider quotes no
// more.
func TestAStoppingProviderPreemptsItsJobsAndTellsTheRenter(t *testing.T) {
	r := newHostileRig(t, Options{}, nil)
	spec := hostileSpec("stopping", "120s")
	lease := r.lease("stopping", spec)
	s := r.start(lease, spec)
	for {
		ev := nextEvent(t, s, "status")
		if ev.Type == "error" {
			t.Fatalf("the job did not start: %+v", ev)
		}
		if ev.Status == "running" {
			break
		}
	}
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	if err := r.prov.providerJobs.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, s, "exit")
	if ev.Type != "exit" || ev.Status != "preempted" || !strings.Contains(ev.Error, sched.ReasonStopping) {
		t.Fatalf("the renter was told %+v, want preempted: %s", ev, sched.ReasonStopping)
	}
	if got := r.leaseState("stopping"); got != leaseEnded {
		t.Fatalf("the lease is %s after the stop, want ended", got)
	}
	if n := r.settlements(wire.LeaseCID(lease)); n != 1 {
		t.Fatalf("%d settlements of the stopped lease, want 1", n)
	}
	var rep wire.QuoteReply
	r.exchange(wire.QuoteProto, wire.QuoteRequest{JobID: "late", Nonce: randomNonce(), Spec: []byte(hostileSpec("late", "1s"))}, &rep)
	if !strings.Contains(rep.Decline, "stopping") {
		t.Fatalf("a stopping provider quoted: decline %q", rep.Decline)
	}
}
