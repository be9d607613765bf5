package node

import (
	"context"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/wire"
)

// TestANewAwardFromTheSameRenterSupersedesAnUnstartedOne: a renter whose
// award reply was lost (a burst, a slow provider) auctions the job again
// and wins the same provider's other GPU. The provider gives the new award
// the job, ending the first, never-started one (settled once, nothing
// charged) instead of refusing "a lease for this job exists already",
// which ended such jobs no-match in a full market. The new lease runs.
func TestANewAwardFromTheSameRenterSupersedesAnUnstartedOne(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	n := startTestNode(t, ctx, "2xRTX4090", Options{})
	if _, err := n.provider.Update(func(s offers.Settings) (offers.Settings, error) {
		s.Region = auction.Region{Country: "DE", Continent: "eu"}
		s.Prices.Bronze, s.Prices.Silver = 500_000, 500_000
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	n.provider.Poke()
	waitFor(t, 20*time.Second, "the provider's offer of two GPUs", func() bool {
		cur := n.provider.Current()
		return cur != nil && len(cur.GPUs) == 2
	})
	h := hostileHost(t, ctx, n)
	r := &hostileRig{t: t, ctx: ctx, prov: n, h: h, key: h.LibP2P().Peerstore().PrivKey(h.ID())}
	spec := hostileSpec("again", "1s")
	first := r.lease("again", spec)
	b, raw := r.quote("again", spec) // the other GPU
	second, refused := r.award(r.leaseFor(b, raw, nil))
	if refused != "" {
		t.Fatalf("the same renter's new award for the job was refused: %s", refused)
	}
	if n := r.settlements(wire.LeaseCID(first)); n != 1 {
		t.Fatalf("%d settlements of the superseded award, want 1", n)
	}
	if got := r.leaseState("again"); got != leaseAwarded {
		t.Fatalf("the job's lease is %s, want awarded (the new one)", got)
	}
	if ev := nextEvent(t, r.start(first, spec), "status"); ev.Type != "error" {
		t.Fatalf("the superseded award started: %+v", ev)
	}
	s := r.start(second, spec)
	if ev := nextEvent(t, s, "exit"); ev.Type != "exit" || ev.Status != "completed" {
		t.Fatalf("the new lease's run: %+v", ev)
	}
}
