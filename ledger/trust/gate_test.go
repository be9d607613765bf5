package trust

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// A store gated by ledger.CheckPayload refuses entries whose payloads
// would lie to reputation: what it stores, the view later reads without
// checking again.
func TestStoreRefusesLyingPayloads(t *testing.T) {
	w := newLedgerWorld(t)
	w.St.CheckPayloads(ledger.CheckPayload)
	prov, renter, other := newActor(t), newActor(t), newActor(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	_, cid := w.lease(renter, prov, "job", auction.Silver, t0, time.Hour, "g")

	try := func(a actor, typ string, payload []byte) error {
		t.Helper()
		_, se, err := ledger.NewEntry(a.Key, w.Heads[a.ID], typ, payload, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return w.St.Append(se)
	}
	mustRefuse := func(what string, a actor, typ string, payload []byte) {
		t.Helper()
		if err := try(a, typ, payload); !errors.Is(err, ledger.ErrBadEntry) {
			t.Errorf("%s: stored (%v)", what, err)
		}
	}
	settle := func(s ledger.Settlement) []byte { b, _ := json.Marshal(s); return b }
	good := voucherFor(t, renter, prov, cid, 2_000_000)

	mustRefuse("a settlement paid by a voucher the renter did not sign", prov, ledger.TypeSettlement,
		settle(ledger.Settlement{Lease: cid, Renter: renter.ID, Total: 2_000_000, Voucher: voucherFor(t, other, prov, cid, 2_000_000)}))
	mustRefuse("a settlement for more than the voucher says", prov, ledger.TypeSettlement,
		settle(ledger.Settlement{Lease: cid, Renter: renter.ID, Total: 3_000_000, Voucher: good}))
	mustRefuse("a settlement claiming payment without a voucher", prov, ledger.TypeSettlement,
		settle(ledger.Settlement{Lease: cid, Renter: renter.ID, Total: 1_000_000}))
	mustRefuse("another provider settling this lease", other, ledger.TypeSettlement,
		settle(ledger.Settlement{Lease: cid, Renter: renter.ID, Total: 2_000_000, Voucher: good}))
	out, _ := json.Marshal(ledger.Outcome{Lease: cid, Provider: prov.ID, Result: ledger.OutcomeCompleted, Voucher: voucherFor(t, other, prov, cid, 1)})
	mustRefuse("an outcome citing someone else's voucher", renter, ledger.TypeOutcome, out)
	l := &auction.Lease{JobID: "half", Network: "test", Renter: renter.ID, Provider: prov.ID, Tier: auction.Silver,
		Price: 1, GPUs: 1, Start: t0.Unix(), End: t0.Add(time.Hour).Unix(), BillingSec: 60, Bid: []byte("bid")}
	sl, _ := auction.ProposeLease(l, renter.Key)
	half, _ := sl.Marshal()
	mustRefuse("a lease the provider never signed", renter, ledger.TypeLease, half)
	mustRefuse("a fraud proof that proves nothing", renter, ledger.TypeFraudProof, []byte("garbage"))
	mustRefuse("a malformed hardware claim", prov, ledger.TypeHardwareClaim, []byte{0xa0, 0x01})
	mustRefuse("a probe with an unknown result", renter, ledger.TypeProbe, []byte(`{"provider":"p","lease":"l","kind":"canary","result":"great"}`))

	// The honest versions of the same entries are stored.
	if err := try(prov, ledger.TypeSettlement, settle(ledger.Settlement{Lease: cid, Renter: renter.ID, Total: 2_000_000, Voucher: good})); err != nil {
		t.Fatalf("honest settlement: %v", err)
	}
	out, _ = json.Marshal(ledger.Outcome{Lease: cid, Provider: prov.ID, Result: ledger.OutcomeCompleted, Voucher: good})
	if err := try(renter, ledger.TypeOutcome, out); err != nil {
		t.Fatalf("honest outcome: %v", err)
	}
}
