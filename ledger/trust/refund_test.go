package trust

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// A settlement that charges part of its voucher and refunds the rest
// counts the charge as what was paid: in the provider's paid total, in
// the weight of its renter's outcome (not the larger voucher the outcome
// cites) and in the provider's rating of the renter. An entry written
// before refunds still counts its whole total.
func TestRefundedSettlementCountsTheCharge(t *testing.T) {
	w := newLedgerWorld(t)
	prov, renter, old := newActor(t), newActor(t), newActor(t)
	t0 := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	_, a := w.lease(renter, prov, "short", auction.Silver, t0, time.Hour, "g")
	_, b := w.lease(old, prov, "old", auction.Silver, t0.Add(time.Hour), time.Hour, "g")
	va, vb := voucherFor(t, renter, prov, a, 37_500), voucherFor(t, old, prov, b, 37_500)
	charged := auction.Credits(625)
	sa, _ := json.Marshal(ledger.Settlement{Lease: a, Renter: renter.ID, Total: 37_500, Voucher: va, Charged: &charged, Refund: 36_875})
	sb, _ := json.Marshal(ledger.Settlement{Lease: b, Renter: old.ID, Total: 37_500, Voucher: vb})
	w.append(prov, ledger.TypeSettlement, sa, t0.Add(time.Minute))
	w.append(prov, ledger.TypeSettlement, sb, t0.Add(time.Hour+time.Minute))
	oa, _ := json.Marshal(ledger.Outcome{Lease: a, Provider: prov.ID, Result: ledger.OutcomeCompleted, Voucher: va})
	w.append(renter, ledger.TypeOutcome, oa, t0.Add(time.Minute))

	v := &View{st: w.St, self: renter.ID}
	_, ev := v.Get()
	if got := ev[prov.ID].PaidTotal; got != 625 {
		t.Fatalf("the provider's paid total is %d, want the 625 charged (not the 37,500 voucher)", got)
	}
	paid := map[string]auction.Credits{}
	for _, s := range v.Settlements() {
		paid[s.Settlement.Lease] = s.Settlement.Paid()
	}
	if paid[a] != 625 || paid[b] != 37_500 {
		t.Fatalf("settlements read as paid %d (refunding) and %d (old), want 625 and 37500", paid[a], paid[b])
	}
	// The provider's ratings of its renters weigh the charge.
	f := v.fold
	for _, r := range renterRatings(f.settlements, f.fs, func(string) *Evidence { return &Evidence{} }) {
		want := map[string]auction.Credits{renter.ID: 625, old.ID: 37_500}[r.Subject]
		if r.Paid != want {
			t.Errorf("rating of %s weighs %d, want %d", r.Subject, r.Paid, want)
		}
	}
}

// A bad outcome keeps its weight whatever the provider's settlement
// charges: a provider that failed a reservation and settles it charging
// nothing (it never ran, nothing was paid) is still rated by its renter,
// with at least one billing interval of the lease both signed, and
// ranks below one that ran the same lease.
func TestAFailedLeaseWeighsThoughNothingWasCharged(t *testing.T) {
	w := newLedgerWorld(t)
	bad, good, renter := newActor(t), newActor(t), newActor(t)
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	_, a := w.lease(renter, bad, "reserved", auction.Gold, t0, time.Hour, "g")
	_, b := w.lease(renter, good, "ran", auction.Gold, t0, time.Hour, "h")
	zero, interval := auction.Credits(0), auction.Credits(60_000)
	sa, _ := json.Marshal(ledger.Settlement{Lease: a, Renter: renter.ID, Charged: &zero})
	w.append(bad, ledger.TypeSettlement, sa, t0.Add(time.Minute))
	vb := voucherFor(t, renter, good, b, interval)
	sb, _ := json.Marshal(ledger.Settlement{Lease: b, Renter: renter.ID, Total: interval, Voucher: vb, Charged: &interval})
	w.append(good, ledger.TypeSettlement, sb, t0.Add(time.Minute))
	oa, _ := json.Marshal(ledger.Outcome{Lease: a, Provider: bad.ID, Result: ledger.OutcomeFailed, Detail: "the reservation never started"})
	ob, _ := json.Marshal(ledger.Outcome{Lease: b, Provider: good.ID, Result: ledger.OutcomeCompleted, Voucher: vb})
	w.append(renter, ledger.TypeOutcome, oa, t0.Add(time.Minute))
	w.append(renter, ledger.TypeOutcome, ob, t0.Add(2*time.Minute))

	v := &View{st: w.St, self: renter.ID}
	_, ev := v.Get()
	eb, eg := ev[bad.ID], ev[good.ID]
	if eb == nil || eb.Score == nil || eb.PaidTotal < interval {
		t.Fatalf("a provider that failed a lease and charged nothing carries no rating: %+v", eb)
	}
	if eg == nil || eg.Score == nil || *eb.Score >= *eg.Score {
		t.Fatalf("the failed provider scores %v, the one that ran %v: want it lower", *eb.Score, eg)
	}
}
