// Package trust is the reputation view: it folds the replicated feeds of
// a ledger into every peer's score, its convictions (objective fraud
// proofs, double leases judged from the feeds) and its hardware claim.
//
// It is a package of its own beside ledger rather than part of it because
// it is a reader of the store, not the store: ledger holds the feeds, the
// payload types with their checks, the proofs and the scoring formula,
// while this package keeps a cache and an incremental fold over any
// Reader, with the clock and the journal handed in. So the simulator runs
// it on an in-memory ledger in virtual time, and ledger itself stays free
// of the provider's billing rules (auction/provider) that ratings weigh by.
package trust

import "github.com/gleaner-net/gleaner/ledger"

// Reader is what the view reads of a ledger: every feed's head, whether a
// feed is frozen (an equivocation proof stands against its author), and a
// feed's entries in order. *ledger.Store satisfies it.
type Reader interface {
	Heads() ([]ledger.Head, error)
	Frozen(author string) ([]byte, bool)
	Walk(author string, from, to uint64, fn func(e *ledger.Entry, se *ledger.SignedEntry) error) error
}

var _ Reader = (*ledger.Store)(nil)
