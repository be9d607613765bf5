package renting

import (
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/trust"
)

// Reputation adapts ledger/trust's view to this node: it reads
// ledger.db, runs on the wall clock and hands the fraud proofs this node
// has standing to journal to record (the journal's tryEnqueue). The view
// is made on first use, so that a literal with st and self is enough
// (as the package's tests make one).
type Reputation struct {
	st   *ledger.Store
	self string
	// record hands an entry to self's journal without waiting (false: the
	// journal is full or closed, and the next pass offers it again); nil:
	// this view journals nothing. Reading a score never appends itself.
	record func(typ string, payload []byte) bool
	// spawn runs the view's passes over the ledger in the background
	// (Node.tasks.Go), so that no auction waits for one; nil: inline.
	spawn func(func()) bool

	once sync.Once
	v    *trust.View
}

// NewReputation is self's view of the reputations in st; record hands
// the fraud proofs it has standing to journal to self's journal (nil:
// none); spawn runs its passes over the ledger in the background (the
// node's task group; nil: inline, as in unit tests).
func NewReputation(st *ledger.Store, self string, record func(typ string, payload []byte) bool, spawn func(func()) bool) *Reputation {
	return &Reputation{st: st, self: self, record: record, spawn: spawn}
}

func (r *Reputation) view() *trust.View {
	r.once.Do(func() {
		r.v = trust.NewView(r.st, r.self, r.record, time.Now)
		if r.spawn != nil {
			r.v.RefreshInBackground(r.spawn)
		}
	})
	return r.v
}

// Scores are every peer's score and the evidence it rests on.
func (r *Reputation) Scores() (map[string]float64, map[string]*trust.Evidence) {
	return r.view().Get()
}

// Score implements auction.Reputation: peers without reputation score 0,
// so a fresh identity never ranks above one with a clean paid history.
func (r *Reputation) Score(provider string) float64 { return r.view().Score(provider) }

// Convicted reports whether an objective fraud proof stands against p.
func (r *Reputation) Convicted(p string) bool { return r.view().Convicted(p) }

// Settlements are the proven settlements in the ledger, as of the latest
// pass.
func (r *Reputation) Settlements() []trust.SettlementAt { return r.view().Settlements() }

// canaryStreak is p's current run of passed canaries (see CanaryRate).
func (r *Reputation) canaryStreak(p string) int { return r.view().CanaryStreak(p) }

// ProofAgainst is one proof that convicts p, to verify offline.
func (r *Reputation) ProofAgainst(p string) ([]byte, bool) { return r.view().ProofAgainst(p) }

// claimRef is a provider's latest hardware claim as the renter's
// telemetry check reads it.
type claimRef struct {
	raw   []byte // the SignedEntry, for a contradiction proof
	time  int64  // unix seconds: samples before it are not held against it
	claim attest.Claim
}

// claimOf is p's latest hardware claim and the signed entry stating it.
func (r *Reputation) claimOf(p string) (claimRef, bool) {
	c, ok := r.view().ClaimOf(p)
	return claimRef{raw: c.Raw, time: c.Time, claim: c.Claim}, ok
}
