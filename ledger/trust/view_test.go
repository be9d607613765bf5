package trust

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

func TestDoubleLeaseConvicts(t *testing.T) {
	w := newLedgerWorld(t)
	prov, r1, r2 := newActor(t), newActor(t), newActor(t)
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	w.lease(r1, prov, "job-1", auction.Silver, t0, time.Hour, "gpu-a")
	w.lease(r2, prov, "job-2", auction.Gold, t0.Add(20*time.Minute), time.Hour, "gpu-a")

	var j memJournal
	v := &View{st: w.St, self: r2.ID, record: j.record}
	if !v.Convicted(prov.ID) {
		t.Fatal("a GPU given to two exclusive leases at once did not convict its provider")
	}
	_, ev := v.Get()
	if c := ev[prov.ID].Convictions; len(c) != 1 || c[0].Kind != ledger.ProofDoubleLease {
		t.Fatalf("convictions %+v", c)
	}
	if sc := v.Score(prov.ID); sc != 0 {
		t.Fatalf("a convicted provider scores %v", sc)
	}
	if raw, ok := v.ProofAgainst(prov.ID); !ok {
		t.Fatal("no proof to hand out")
	} else if vd, err := ledger.VerifyAnyProof(raw); err != nil || vd.Kind != ledger.ProofDoubleLease || vd.Author != prov.ID {
		t.Fatalf("handed-out proof: %+v %v", vd, err)
	}
	// The wronged renter journals the proof once, however often it looks.
	for range 3 {
		v.mu.Lock()
		v.refresh(true)
		v.mu.Unlock()
	}
	// The pass hands the proof to the journal as it reads (the journal
	// appends it later, in order): nothing to wait for here.
	if n := j.count(ledger.TypeFraudProof); n != 1 {
		t.Fatalf("journaled %d fraud proofs, want 1", n)
	}
	// A journal that is full takes nothing: the next pass offers the
	// proof again, and once taken it is not offered a second time.
	full := memJournal{refuse: 1}
	again := &View{st: w.St, self: r2.ID, record: full.record}
	for range 3 {
		again.mu.Lock()
		again.refresh(true)
		again.mu.Unlock()
	}
	if n, offered := full.count(ledger.TypeFraudProof), full.offered; n != 1 || offered != 2 {
		t.Fatalf("after a full journal: %d fraud proofs taken in %d offers, want 1 in 2", n, offered)
	}
	// A bystander convicts too but has no standing to journal.
	var j2 memJournal
	other := &View{st: w.St, self: newActor(t).ID, record: j2.record}
	if !other.Convicted(prov.ID) {
		t.Fatal("a bystander holding both leases did not convict")
	}
	if j2.count(ledger.TypeFraudProof) != 0 || j2.offered != 0 {
		t.Fatal("a bystander journaled a proof")
	}
}

func TestDoubleLeaseExcused(t *testing.T) {
	w := newLedgerWorld(t)
	prov, r1, r2 := newActor(t), newActor(t), newActor(t)
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	_, a := w.lease(r1, prov, "job-1", auction.Silver, t0, time.Hour, "gpu-a")
	// Job 1 finished after 10 minutes; the provider settled it.
	settle, _ := json.Marshal(ledger.Settlement{Lease: a, Renter: r1.ID, Total: 0})
	w.append(prov, ledger.TypeSettlement, settle, t0.Add(10*time.Minute))
	w.lease(r2, prov, "job-2", auction.Silver, t0.Add(11*time.Minute), time.Hour, "gpu-a")
	// Bronze is preemptible: sharing its window is the tier's contract.
	w.lease(r1, prov, "job-3", auction.Bronze, t0.Add(15*time.Minute), time.Hour, "gpu-a")
	// Other GPUs of the same provider are other GPUs.
	w.lease(r1, prov, "job-4", auction.Silver, t0.Add(15*time.Minute), time.Hour, "gpu-b")

	v := &View{st: w.St, self: r1.ID}
	if v.Convicted(prov.ID) {
		_, ev := v.Get()
		t.Fatalf("an honest provider was convicted: %+v", ev[prov.ID].Convictions)
	}
}

func TestRenterRatedByPayment(t *testing.T) {
	w := newLedgerWorld(t)
	prov, payer, deadbeat, stranger := newActor(t), newActor(t), newActor(t), newActor(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	_, a := w.lease(payer, prov, "job-1", auction.Silver, t0, time.Hour, "g")
	_, b := w.lease(deadbeat, prov, "job-2", auction.Silver, t0.Add(2*time.Hour), time.Hour, "g")
	s1, _ := json.Marshal(ledger.Settlement{Lease: a, Renter: payer.ID, Total: 1_500_000, Voucher: voucherFor(t, payer, prov, a, 1_500_000)})
	s2, _ := json.Marshal(ledger.Settlement{Lease: b, Renter: deadbeat.ID, Total: 100_000, Voucher: voucherFor(t, deadbeat, prov, b, 100_000), Unpaid: true})
	w.append(prov, ledger.TypeSettlement, s1, t0.Add(time.Hour))
	w.append(prov, ledger.TypeSettlement, s2, t0.Add(3*time.Hour))
	// A settlement for a lease that does not exist rates nobody.
	_, unknown := newLedgerWorld(t).lease(stranger, prov, "job-3", auction.Silver, t0, time.Hour, "g")
	s3, _ := json.Marshal(ledger.Settlement{Lease: unknown, Renter: stranger.ID, Total: 100_000, Voucher: voucherFor(t, stranger, prov, unknown, 100_000), Unpaid: true})
	w.append(prov, ledger.TypeSettlement, s3, t0.Add(3*time.Hour))

	// The provider's own view: its direct experience rates both renters.
	v := &View{st: w.St, self: prov.ID}
	sc, ev := v.Get()
	if ev[payer.ID].Payments["paid"] != 1 || ev[deadbeat.ID].Payments["unpaid"] != 1 {
		t.Fatalf("payment records: %+v, %+v", ev[payer.ID].Payments, ev[deadbeat.ID].Payments)
	}
	if !(sc[payer.ID] > sc[deadbeat.ID]) {
		t.Fatalf("a renter that paid (%v) should outrank one that stopped paying (%v)", sc[payer.ID], sc[deadbeat.ID])
	}
	if e := ev[stranger.ID]; e != nil && len(e.Payments) > 0 {
		t.Fatalf("a settlement without a co-signed lease rated its renter: %+v", e.Payments)
	}
}

// Nobody can frame an honest provider: a proof journaled for a lease the
// provider settled before re-leasing its GPU convicts nobody, and nobody
// but the renter can close a lease early.
func TestDoubleLeaseFramingAndBackdating(t *testing.T) {
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)

	// Framing: the provider settled A before signing B.
	w := newLedgerWorld(t)
	prov, r1, r2, stranger := newActor(t), newActor(t), newActor(t), newActor(t)
	a, ca := w.lease(r1, prov, "job-1", auction.Silver, t0, time.Hour, "gpu-a")
	settle, _ := json.Marshal(ledger.Settlement{Lease: ca, Renter: r1.ID})
	w.append(prov, ledger.TypeSettlement, settle, t0.Add(5*time.Minute))
	b, _ := w.lease(r2, prov, "job-2", auction.Silver, t0.Add(10*time.Minute), time.Hour, "gpu-a")
	proof, err := ledger.NewDoubleLeaseProof(a, b).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.VerifyDoubleLease(proof); err != nil {
		t.Fatalf("the framing proof should verify offline (it shows two signed leases): %v", err)
	}
	w.append(stranger, ledger.TypeFraudProof, proof, time.Now())
	if v := (&View{st: w.St, self: newActor(t).ID}); v.Convicted(prov.ID) {
		t.Fatal("a journaled double-lease proof for a lease settled before the GPU was leased again convicted")
	}

	// Back-dating: the provider double-leases, then a stranger and the
	// provider itself journal that the first lease ended early.
	w = newLedgerWorld(t)
	_, ca = w.lease(r1, prov, "job-1", auction.Silver, t0, time.Hour, "gpu-a")
	w.lease(r2, prov, "job-2", auction.Silver, t0.Add(10*time.Minute), time.Hour, "gpu-a")
	fake, _ := json.Marshal(ledger.Outcome{Lease: ca, Provider: prov.ID, Result: ledger.OutcomeCompleted})
	w.append(stranger, ledger.TypeOutcome, fake, t0.Add(time.Minute))
	late, _ := json.Marshal(ledger.Settlement{Lease: ca, Renter: r1.ID})
	w.append(prov, ledger.TypeSettlement, late, t0.Add(time.Minute)) // dated early, journaled after B
	if v := (&View{st: w.St, self: newActor(t).ID}); !v.Convicted(prov.ID) {
		t.Fatal("a back-dated end by a stranger or a late settlement excused a double lease")
	}

	// The renter's own word does close its lease.
	w = newLedgerWorld(t)
	_, ca = w.lease(r1, prov, "job-1", auction.Silver, t0, time.Hour, "gpu-a")
	done, _ := json.Marshal(ledger.Outcome{Lease: ca, Provider: prov.ID, Result: ledger.OutcomeCancelled})
	w.append(r1, ledger.TypeOutcome, done, t0.Add(5*time.Minute))
	w.lease(r2, prov, "job-2", auction.Silver, t0.Add(10*time.Minute), time.Hour, "gpu-a")
	if v := (&View{st: w.St, self: newActor(t).ID}); v.Convicted(prov.ID) {
		t.Fatal("a lease its renter ended was held against the provider")
	}
}
