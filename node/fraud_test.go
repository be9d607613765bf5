package node

import (
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ledgerWorld is a real ledger store holding the feeds of a few actors,
// each appended with the actor's own key, as replication would leave them.
type ledgerWorld struct {
	t     *testing.T
	st    *ledger.Store
	heads map[string]*ledger.Entry
}

type actor struct {
	key crypto.PrivKey
	id  string
}

func newActor(t testing.TB) actor {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return actor{k, id.String()}
}

func newLedgerWorld(t *testing.T) *ledgerWorld {
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &ledgerWorld{t: t, st: st, heads: map[string]*ledger.Entry{}}
}

func (w *ledgerWorld) append(a actor, typ string, payload []byte, at time.Time) {
	w.t.Helper()
	e, se, err := ledger.NewEntry(a.key, w.heads[a.id], typ, payload, at)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.st.Append(se); err != nil {
		w.t.Fatal(err)
	}
	w.heads[a.id] = e
}

func TestJournaledProofConvicts(t *testing.T) {
	w := newLedgerWorld(t)
	liar, renter := newActor(t), newActor(t)
	// The liar's node runs simulated GPUs but claims real ones.
	src, err := attest.NewSimulatedSeed("1xRTX4090", liar.id)
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := src.Inventory(t.Context())
	claim := attest.ClaimOf(inv)
	claim.Simulated, claim.GPUs[0].Simulated = false, false
	payload, _ := claim.Encode()
	_, claimEntry, err := ledger.NewEntry(liar.key, nil, ledger.TypeHardwareClaim, payload, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.st.Append(claimEntry); err != nil {
		t.Fatal(err)
	}
	claimRaw, _ := claimEntry.Marshal()

	// The renter checks the signed telemetry of its run against the claim.
	pid, _ := peer.Decode(liar.id)
	nonce := []byte("0123456789abcdef")
	tel := newTelemetry(pid, "lease-1", nonce)
	var proofs [][]byte
	tel.claimOf = func(string) (claimRef, bool) { return claimRef{raw: claimRaw, claim: claim}, true }
	tel.onProof = func(p []byte) { proofs = append(proofs, p) }
	g := inv.GPUs[0]
	sampler, err := attest.NewSampler(liar.key, "lease-1", nonce, attest.UUIDHash(g.UUID))
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
	if err != nil || verdict.Author != liar.id {
		t.Fatalf("proof does not verify: %+v %v", verdict, err)
	}

	// Journaled by the renter and replicated, the proof convicts the liar
	// on every node that reads it.
	w.append(renter, ledger.TypeFraudProof, proofs[0], time.Now())
	v := &reputationView{st: w.st, self: newActor(t).id}
	if !v.convicted(liar.id) {
		t.Fatal("a journaled contradiction proof did not convict")
	}
	_, ev := v.get()
	if ev[liar.id].Claim == nil || ev[liar.id].Claim.Simulated {
		t.Fatalf("evidence should show the (false) claim: %+v", ev[liar.id].Claim)
	}
	// A garbage "proof" convicts nobody.
	w.append(renter, ledger.TypeFraudProof, []byte("garbage"), time.Now())
	v2 := &reputationView{st: w.st, self: newActor(t).id}
	_, ev2 := v2.get()
	if n := len(ev2[liar.id].Convictions); n != 1 {
		t.Fatalf("%d convictions, want 1", n)
	}
}
