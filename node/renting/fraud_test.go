package renting

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger/ledgertest"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ledgerWorld is a real ledger store holding the feeds of a few actors
// (ledger/ledgertest), with this package's own helpers on top.
type ledgerWorld struct{ *ledgertest.World }

type actor = ledgertest.Actor

var newActor = ledgertest.NewActor

func newLedgerWorld(t *testing.T) *ledgerWorld { return &ledgerWorld{ledgertest.NewWorld(t)} }

func (w *ledgerWorld) append(a actor, typ string, payload []byte, at time.Time) {
	w.T.Helper()
	w.Append(a, typ, payload, at)
}

func TestJournaledProofConvicts(t *testing.T) {
	w := newLedgerWorld(t)
	liar, renter := newActor(t), newActor(t)
	// The liar's node runs simulated GPUs but claims real ones.
	src, err := attest.NewSimulatedSeed("1xRTX4090", liar.ID)
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := src.Inventory(t.Context())
	claim := attest.ClaimOf(inv)
	claim.Simulated, claim.GPUs[0].Simulated = false, false
	payload, _ := claim.Encode()
	_, claimEntry, err := ledger.NewEntry(liar.Key, nil, ledger.TypeHardwareClaim, payload, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.St.Append(claimEntry); err != nil {
		t.Fatal(err)
	}
	claimRaw, _ := claimEntry.Marshal()

	// The renter checks the signed telemetry of its run against the claim.
	pid, _ := peer.Decode(liar.ID)
	nonce := []byte("0123456789abcdef")
	tel := newTelemetry(pid, "lease-1", nonce)
	var proofs [][]byte
	tel.claimOf = func(string) (claimRef, bool) { return claimRef{raw: claimRaw, claim: claim}, true }
	tel.onProof = func(p []byte) { proofs = append(proofs, p) }
	g := inv.GPUs[0]
	sampler, err := attest.NewSampler(liar.Key, "lease-1", nonce, attest.UUIDHash(g.UUID))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, raw, err := sampler.Sign(g, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tel.accept(raw)
	}
	if len(proofs) != 1 || tel.sum.Contradiction == "" || tel.sum.Samples != 3 {
		t.Fatalf("proofs %d, summary %+v", len(proofs), tel.sum)
	}
	verdict, err := ledger.VerifyContradiction(proofs[0])
	if err != nil || verdict.Author != liar.ID {
		t.Fatalf("proof does not verify: %+v %v", verdict, err)
	}

	// Journaled by the renter and replicated, the proof convicts the liar
	// on every node that reads it.
	w.append(renter, ledger.TypeFraudProof, proofs[0], time.Now())
	v := &Reputation{st: w.St, self: newActor(t).ID}
	if !v.Convicted(liar.ID) {
		t.Fatal("a journaled contradiction proof did not convict")
	}
	_, ev := v.Scores()
	if ev[liar.ID].Claim == nil || ev[liar.ID].Claim.Simulated {
		t.Fatalf("evidence should show the (false) claim: %+v", ev[liar.ID].Claim)
	}
	// A garbage "proof" convicts nobody.
	w.append(renter, ledger.TypeFraudProof, []byte("garbage"), time.Now())
	v2 := &Reputation{st: w.St, self: newActor(t).ID}
	_, ev2 := v2.Scores()
	if n := len(ev2[liar.ID].Convictions); n != 1 {
		t.Fatalf("%d convictions, want 1", n)
	}
}
