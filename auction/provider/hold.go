package provider

import (
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Quote holds: late binding at the provider (issue 33).
//
// A bid names the GPUs its award will claim. Without a hold, concurrent
// quotes for different jobs named the same free GPUs, and in a burst the
// second award for them was refused as raced and its renter asked again.
// A hold is the quote's tentative reservation: for its short lifetime the
// GPUs it names are left out of every other job's plan and refused to
// every other job's claim, so that an award for a live quote is never
// refused for a race with another quote. The hold ends when the award is
// claimed (the lease takes over the GPUs), when its renter releases it
// (another provider won the round), or when it lapses.

// DefaultQuoteHold is how long a quote holds the GPUs it names. It must
// outlast the renter's round: the quote deadline (3 s), the ranking, and
// the award's trip (its deadline is 10 s, but an award arrives well
// within a second of the quotes on any network a market runs on). A
// renter that lost the round releases the hold at once; one that went
// silent blocks the GPUs for this long at most.
const DefaultQuoteHold = 10 * time.Second

// Hold caps. A renter's quotes hold GPUs it has not paid for, so a renter
// may hold for MaxHoldsPerRenter jobs at once here and the provider for
// HoldsPerGPU holds per sellable GPU (at least MinHolds): memory is
// bounded whatever renters do. A quote beyond a cap is answered all the
// same, without a hold, as every quote was before holds: its award may
// race, as it always could, but the market keeps working.
const (
	MaxHoldsPerRenter = 8
	HoldsPerGPU       = 4
	MinHolds          = 16
)

// ErrHeld declines a quote when the GPUs it needs are free but promised to
// other jobs' live quotes: its renter asks again shortly (a race, not a
// lack of capacity), by when the holds were claimed, released or lapsed.
var ErrHeld = errors.New(auction.ReasonHeld)

// WithQuoteHold sets how long a quote holds the GPUs it names; <= 0 keeps
// DefaultQuoteHold. (No holds at all is not an option: that is the race
// this package removed.)
func WithQuoteHold(d time.Duration) Option { return func(s *Scheduler) { s.holdFor = d } }

// Holder is who a quote's hold is for: the renter that asked, as the
// transport authenticated it, its job, and the round's nonce, which a
// release must repeat.
type Holder struct {
	Renter string
	JobID  string
	Nonce  []byte
}

func (h Holder) key() holdKey { return holdKey{h.Renter, h.JobID} }

// holdKey is a hold's identity: a job's ID is the renter's to choose, so
// two renters' jobs of one ID hold apart and neither can replace or
// consume the other's hold.
type holdKey struct{ renter, job string }

type hold struct {
	nonce string
	gpus  []int
	span  Span // as holdSpan gives it: what the award's lease would block
	until time.Time
}

// pruneHolds forgets holds that lapsed by now. Called with s.mu held.
func (s *Scheduler) pruneHolds(now time.Time) {
	for k, h := range s.holds {
		if !now.Before(h.until) {
			s.dropHold(k)
		}
	}
}

// dropHold forgets k's hold, if any. Called with s.mu held.
func (s *Scheduler) dropHold(k holdKey) {
	if _, ok := s.holds[k]; !ok {
		return
	}
	delete(s.holds, k)
	if s.perRenter[k.renter]--; s.perRenter[k.renter] <= 0 {
		delete(s.perRenter, k.renter)
	}
}

// promisedTo marks in into the GPUs promised to live holds other than
// self's that overlap span, and says whether any is. Called with s.mu
// held, after pruneHolds.
func (s *Scheduler) promisedTo(self holdKey, span Span, into *[maxIndex + 1]bool) bool {
	found := false
	for k, h := range s.holds {
		if k == self || !h.span.overlaps(span) {
			continue
		}
		for _, i := range h.gpus {
			into[i] = true
			found = true
		}
	}
	return found
}

// promised reports whether any of gpus is promised to a live hold other
// than self's overlapping span. Called with s.mu held.
func (s *Scheduler) promised(self holdKey, gpus []int, span Span, now time.Time) bool {
	s.pruneHolds(now)
	if len(s.holds) == 0 {
		return false
	}
	var held [maxIndex + 1]bool
	if !s.promisedTo(self, span, &held) {
		return false
	}
	for _, i := range gpus {
		if i >= 0 && i <= maxIndex && held[i] {
			return true
		}
	}
	return false
}

// holdCap is how many holds the provider keeps at most. Called with s.mu
// held.
func (s *Scheduler) holdCap() int {
	n := 0
	for i := range s.gpus {
		if s.gpus[i].known && s.gpus[i].out == "" {
			n++
		}
	}
	return max(HoldsPerGPU*n, MinHolds)
}

// place records h's hold on gpus for span, unless a cap is reached: the
// quote is then answered without one. Called with s.mu held, after h's
// previous hold was dropped.
func (s *Scheduler) place(h Holder, gpus []int, span Span, now time.Time) bool {
	if h.Renter == "" || h.JobID == "" || s.perRenter[h.Renter] >= MaxHoldsPerRenter || len(s.holds) >= s.holdCap() {
		return false
	}
	s.holds[h.key()] = &hold{nonce: string(h.Nonce), gpus: append([]int(nil), gpus...), span: span, until: now.Add(s.holdFor)}
	s.perRenter[h.Renter]++
	return true
}

// ReleaseHold ends the hold of the quote h answered, at once: its renter
// awarded another provider or gave the round up. Only the hold's own
// renter with the round's nonce releases it, so a stranger cannot free
// GPUs promised to someone else, nor a late release of an earlier round
// the hold of a later one. It reports whether a hold was released.
func (s *Scheduler) ReleaseHold(h Holder, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneHolds(now)
	k := h.key()
	if cur, ok := s.holds[k]; !ok || cur.nonce != string(h.Nonce) {
		return false
	}
	s.dropHold(k)
	return true
}

// Holds is how many quote holds are live at now, for tests and metrics.
func (s *Scheduler) Holds(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneHolds(now)
	return len(s.holds)
}
