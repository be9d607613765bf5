package auction

import (
	"math"
	"runtime"
	"sync"
	"time"
)

// Env is what matching needs from the renter's node besides the offers:
// the clock, measured round trips and reputation. All three are injected
// so that simulations run the same code in virtual time.
type Env struct {
	Now time.Time
	// RTT is the measured round trip to a provider; false when not yet
	// measured. nil means nothing is known. Feasible may call it from
	// several goroutines at once.
	RTT        func(provider string) (time.Duration, bool)
	Reputation Reputation // nil counts as NeutralReputation
	// Tiebreak orders providers whose bids tie (Ranked.Tiebreak); nil:
	// by provider ID. A renter draws it anew each round (TiebreakOf).
	Tiebreak func(provider string) uint64
}

// Reputation is this node's view of a provider, 0 (worst) to 1 (best). The
// ledger implements it; auction owns the interface because it is the
// consumer and needs only this.
type Reputation interface {
	Score(provider string) float64
}

// NeutralReputation scores everyone 0.5: the prior for an unknown peer,
// used where no ledger is wired in (tests, the bid engine).
type NeutralReputation struct{}

// Score is 0.5 for every provider.
func (NeutralReputation) Score(string) float64 { return 0.5 }

// reputationOf reads r defensively: it comes from outside the package, and
// a NaN or out-of-range score would otherwise poison every comparison.
func reputationOf(r Reputation, provider string) float64 {
	if r == nil {
		return 0.5
	}
	s := r.Score(provider)
	if math.IsNaN(s) {
		return 0
	}
	return min(1, max(0, s))
}

// Rejection records why an offer cannot run a job: the first check, in
// stack order, that failed, and its constant reason. Feasible sets only
// those; Diagnose adds the numbers behind them (Detail) and every other
// check the offer fails (All), for `job explain`.
type Rejection struct {
	Provider string `json:"provider"`
	Check    string `json:"check"`
	Reason   string `json:"reason"`
	// Detail is the first failure's numbers in words, e.g. "silver floor
	// 2/GPU-h in effect (peak x2 until 18:00 UTC; base 1), above
	// max_price 1"; "" where the reason says it all.
	Detail string `json:"detail,omitempty"`
	// All is every check the offer fails, in stack order, the first
	// being Check: what to change to admit it; empty when it fails
	// only Check.
	All []Failure `json:"all,omitempty"`
}

// Feasible splits offers into those that can run spec at env.Now and the
// rest, each rejection naming its check and reason. It never drops an
// offer silently: len(ok)+len(rejected) == len(offers), both in the order
// of offers. A large book is split among GOMAXPROCS stacks of the same
// checkers, so env.RTT must be safe for concurrent use (a peerstore is).
func Feasible(spec *JobSpec, offers []*Offer, env Env) (ok []*Offer, rejected []Rejection) {
	workers := min(runtime.GOMAXPROCS(0), len(offers)/parallelMin)
	// Most of a large book is rejected for any one job; sizing for all of
	// it once is cheaper than growing the slice through 100,000 appends.
	// A book under parallelMin offers, as an indexed book hands a round
	// (a few thousand at 10,000 providers, most of them feasible), grows
	// it as rejections come: sizing it for every offer was most of what
	// the simulator allocated (issue 33).
	rejected = []Rejection{} // never nil, as before
	if workers > 1 || len(offers) >= parallelMin {
		rejected = make([]Rejection, 0, len(offers))
	}
	if workers <= 1 {
		it := newFeasibilityStack(spec, env, &sliceIterator{offers: offers}, &rejected)
		for o := it.Next(); o != nil; o = it.Next() {
			ok = append(ok, o)
		}
		return ok, rejected
	}
	// Each part owns a disjoint window of rejected's array, as large as its
	// share of offers, so no part ever reallocates or touches another's.
	type part struct {
		ok  []*Offer
		rej []Rejection
	}
	parts := make([]part, workers)
	buf := rejected[:cap(rejected)]
	var wg sync.WaitGroup
	for w := range parts {
		lo, hi := len(offers)*w/workers, len(offers)*(w+1)/workers
		p := &parts[w]
		p.rej = buf[lo:lo:hi]
		wg.Go(func() {
			it := newFeasibilityStack(spec, env, &sliceIterator{offers: offers[lo:hi]}, &p.rej)
			for o := it.Next(); o != nil; o = it.Next() {
				p.ok = append(p.ok, o)
			}
		})
	}
	wg.Wait()
	// Compact in place: each part's window starts at or after the end of
	// what is already gathered, and append copies with memmove.
	for _, p := range parts {
		ok = append(ok, p.ok...)
		rejected = append(rejected, p.rej...)
	}
	return ok, rejected
}

// parallelMin is the fewest offers per worker worth a goroutine: below it
// the scheduling costs more than the checks.
const parallelMin = 8192

// offerIterator yields offers one at a time and nil when exhausted. Each
// checker wraps a source and pulls from it until an offer passes, so a
// stack of them streams offers without intermediate slices (Nomad's
// FeasibleIterator).
type offerIterator interface {
	Next() *Offer
}

type sliceIterator struct {
	offers []*Offer
	i      int
}

func (s *sliceIterator) Next() *Offer {
	for s.i < len(s.offers) {
		o := s.offers[s.i]
		s.i++
		if o != nil {
			return o
		}
	}
	return nil
}

// checkIterator is one feasibility checker over a source: check returns ""
// to pass an offer, or a constant reason, which is appended to rejected
// (shared by the whole stack, in the order offers were rejected).
type checkIterator struct {
	src      offerIterator
	name     string
	check    func(*Offer) string
	rejected *[]Rejection
}

func (c *checkIterator) Next() *Offer {
	for {
		o := c.src.Next()
		if o == nil {
			return nil
		}
		reason := c.check(o)
		if reason == "" {
			return o
		}
		*c.rejected = append(*c.rejected, Rejection{Provider: o.Provider, Check: c.name, Reason: reason})
	}
}

// The checks, in stack order. These names are stable: `job explain` and
// scripts group rejections by them.
const (
	CheckLive      = "live"
	CheckTier      = "tier"
	CheckPrice     = "price"
	CheckRegion    = "region"
	CheckCountry   = "country"
	CheckSimulated = "simulated"
	CheckGPUs      = "gpus"
	CheckHost      = "host"
	CheckPolicy    = "policy"
	CheckCalendar  = "calendar"
	CheckRTT       = "rtt"
)

// FeasibilityChecks are the check names in the order the stack applies
// them; an offer is charged to the first one it fails.
var FeasibilityChecks = []string{CheckLive, CheckTier, CheckPrice, CheckRegion, CheckCountry,
	CheckSimulated, CheckGPUs, CheckHost, CheckPolicy, CheckCalendar, CheckRTT}

// newFeasibilityStack composes the checkers over src. The order is part of
// the contract (each rejection names the first failing check) and is
// chosen for cost: what compares a few integers and is most selective
// runs first, so that the costlier checks see few offers.
func newFeasibilityStack(spec *JobSpec, env Env, src offerIterator, rejected *[]Rejection) offerIterator {
	it := src
	for _, c := range newMatcher(spec, env).checks() {
		it = &checkIterator{src: it, name: c.name, check: c.check, rejected: rejected}
	}
	return it
}

type namedCheck struct {
	name  string
	check func(*Offer) string
}

// checks are m's checks in stack order, as FeasibilityChecks names them.
func (m *matcher) checks() []namedCheck {
	return []namedCheck{
		// Liveness first: every later check assumes an offer that still stands.
		{CheckLive, m.live},
		// The tier and the price are one integer each and, with the renter's
		// max price, typically remove most of the book.
		{CheckTier, m.tier},
		{CheckPrice, m.price},
		// Then the provider's location, read from the offer itself: residency
		// is a hard constraint and as cheap as a string comparison.
		{CheckRegion, m.region},
		{CheckCountry, m.country},
		// The GPUs: the first checks to chase the offer's GPU list, a cache
		// miss per offer in a large book, so they run after the checks that
		// need none.
		{CheckSimulated, m.simulated},
		{CheckGPUs, m.gpus},
		{CheckHost, m.host},
		// The owner's policy: path.Match over the allowlist is the costliest
		// of the pure checks.
		{CheckPolicy, m.policy},
		// The calendar binary-searches the offer's windows.
		{CheckCalendar, m.calendar},
		// RTT last: it calls out of the package (a peerstore lookup) and so
		// should see only offers that pass everything else.
		{CheckRTT, m.rtt},
	}
}

// FunnelStep is how many offers one check removed.
type FunnelStep struct {
	Check   string `json:"check"`
	Removed int    `json:"removed"`
}

// Funnel counts rejections per check in stack order, for `job explain`:
// how the book narrowed down to what was left.
func Funnel(rejected []Rejection) []FunnelStep {
	steps := make([]FunnelStep, len(FeasibilityChecks))
	for i, c := range FeasibilityChecks {
		steps[i].Check = c
	}
	for _, r := range rejected {
		for i, c := range FeasibilityChecks {
			if r.Check == c {
				steps[i].Removed++
				break
			}
		}
	}
	return steps
}

// StartAllowed checks a spec that is about to start against the owner's
// offer as it stands now: the tier, the host's CPUs and memory and the
// policy (workload, maximum duration, image allowlist). It is the
// provider's second look at what it quoted, since the owner may have
// narrowed the policy meanwhile; the calendar and prices were settled by
// the lease. "" when the start is allowed, else the constant reason.
func StartAllowed(spec *JobSpec, offer *Offer) string {
	if offer == nil {
		return ReasonWithdrawn
	}
	m := newMatcher(spec, Env{})
	for _, check := range []func(*Offer) string{m.tier, m.host, m.policy} {
		if why := check(offer); why != "" {
			return why
		}
	}
	return ""
}
