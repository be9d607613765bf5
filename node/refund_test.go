package node

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
)

// A job that ends long before its first interval is up pays for what ran:
// the provider's settlement charges the billed running time to the second
// and refunds the rest of the voucher, and the renter's record shows the
// charge and the refund, within its own bound. Real daemons on loopback:
// the hostile rig's provider (Docker, one simulated GPU, bronze at 0.50
// credits per GPU-hour) and a renter node that auctions the job.
func TestRefundAShortJobPaysForWhatRan(t *testing.T) {
	r := newHostileRig(t, Options{}, nil)
	rn := startTestNode(t, r.ctx, "", Options{})
	if err := rn.Host().LibP2P().Connect(r.ctx, addrInfo(r.prov.Host())); err != nil {
		t.Fatal(err)
	}
	prov := r.prov.Host().ID().String()
	// Published again now that the renter listens.
	if _, err := r.prov.provider.Update(func(s offers.Settings) (offers.Settings, error) { s.Prices.Bronze = 500_001; return s, nil }); err != nil {
		t.Fatal(err)
	}
	r.prov.provider.Poke()
	waitFor(t, 20*time.Second, "the provider's offer in the renter's book", func() bool {
		_, _, ok := rn.market.Book().Get(prov)
		return ok
	})
	j, err := rn.renterJobs.Submit([]byte(hostileSpec("short", "100ms")), nil, renting.SubmitOptions{Provider: prov})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the job to end", func() bool {
		got, err := rn.renterJobs.Get(j.ID)
		if err == nil {
			j = got
		}
		return err == nil && renting.Terminal(j.State)
	})
	if j.State != renting.StateCompleted || j.Charged == nil {
		t.Fatalf("the job ended %s (%s), charged %v", j.State, j.Error, j.Charged)
	}
	l, _, err := auction.DecodeSignedLease(j.Lease, true)
	if err != nil {
		t.Fatal(err)
	}
	per := sched.IntervalPrice(l) // 0.500001 × 300 s / 3600 s: 41,666
	// The provider's settlement: the voucher total, the charge for the
	// whole seconds run (well under a minute of a 5-minute interval), and
	// the rest refunded.
	var s *ledger.Settlement
	waitFor(t, 10*time.Second, "the provider's settlement", func() bool {
		_ = r.prov.ledger.Walk(prov, 0, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
			if e.Type == ledger.TypeSettlement {
				if st, err := ledger.DecodePayload[ledger.Settlement](e.Payload); err == nil && st.Lease == j.LeaseCID {
					s = st
				}
			}
			return nil
		})
		return s != nil
	})
	if s.Total != per || s.Charged == nil || j.Paid != per || j.Vouchers != 1 {
		t.Fatalf("settlement %+v (charged %v), renter paid %d in %d vouchers; want one voucher of %d", s, s.Charged, j.Paid, j.Vouchers, per)
	}
	charged := *s.Charged
	secs := int64(-1)
	for n := int64(1); n < 60; n++ {
		if sched.Cost(l, time.Duration(n)*time.Second) == charged {
			secs = n
			break
		}
	}
	if secs < 0 || s.Refund != per-charged || s.Refund <= 0 {
		t.Fatalf("settlement charged %d, refund %d of %d: not the cost of whole seconds under a minute, with the rest refunded", charged, s.Refund, s.Total)
	}
	// What ran, as the renter saw it (from "running" to the exit), rounded
	// up, is at least what was charged, and the charge is within the
	// renter's own bound.
	if j.StartedAt == nil || j.EndedAt == nil {
		t.Fatalf("no run times recorded: %+v", j)
	}
	if seen := sched.BilledSeconds(j.EndedAt.Sub(*j.StartedAt)); seen+1 < secs {
		t.Fatalf("charged for %d s, the renter saw the job run %v", secs, j.EndedAt.Sub(*j.StartedAt))
	}
	t.Logf("voucher %d, charged %d (%d s), refunded %d; the renter's bound %d", per, charged, secs, s.Refund, j.ChargeBound)
	if *j.Charged != charged || j.Refunded != per-charged || j.ChargeDisputed || j.ChargeBound < charged || j.ChargeBound >= per {
		t.Fatalf("the renter's record: charged %d, refunded %d, bound %d, disputed %v; the settlement charged %d of %d",
			*j.Charged, j.Refunded, j.ChargeBound, j.ChargeDisputed, charged, per)
	}
}
