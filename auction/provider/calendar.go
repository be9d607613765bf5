package provider

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The provider's calendar: a gold reservation commits its GPUs for its
// own window, not from its award, and the gap before it is sold. Silver
// is sold into the gap only if its longest run ends before the
// reservation (the ordinary overlap check sees to that); bronze is sold
// into it if it can run at least MinBackfill before its notice begins,
// holds its GPUs until the reservation starts, and is preempted with its
// notice before then. Nothing here ever moves a reservation.

// holdSpan is what a lease of tier wanting want commits its GPUs for
// when claimed at now. A gold reservation (a window that starts later)
// holds its GPUs for its window alone, so that the gap before it can be
// sold (backfill); every other lease holds them from its claim to its end.
func holdSpan(tier auction.Tier, want Span, now time.Time) Span {
	if tier == auction.Gold && want.Start.After(now) {
		return Span{want.Start, later(want.End, want.Start.Add(time.Nanosecond))}
	}
	return Span{now, later(want.End, now.Add(time.Nanosecond))}
}

// MinBackfill is the shortest gap before a reservation that a bronze lease
// is sold into: it must be able to run this long before the notice of its
// preemption begins, or the owner would sell a job only to stop it.
const MinBackfill = 10 * time.Second

// backfills: a bronze lease claimed at now with notice may run on a GPU
// until a reservation that starts at start, being preempted with its
// notice before then.
func backfills(start, now time.Time, notice time.Duration) bool {
	return start.Sub(now) >= notice+MinBackfill
}

// reservedIn is the earliest start, inside span, of a reservation
// (a silver or gold commitment that starts after span.Start) on any of
// gpus, other than self's; zero if none. Called with s.mu held.
func (s *Scheduler) reservedIn(gpus []int, self *lease, span Span) time.Time {
	var first time.Time
	for _, i := range gpus {
		for _, c := range s.gpus[i].commits {
			if c.l == self || c.l.l.Tier == auction.Bronze || !c.start.After(span.Start) || !c.start.Before(span.End) {
				continue
			}
			if first.IsZero() || c.start.Before(first) {
				first = c.start
			}
		}
	}
	return first
}

// fit makes a bronze lease's commitments end where the first reservation
// on its GPUs begins (or at its own end, once that reservation is gone),
// and arms its preemption before then (unless it is being stopped
// already). Called with s.mu held, after any
// claim or release on its GPUs.
func (s *Scheduler) fit(l *lease, now time.Time) {
	if l.l.Tier != auction.Bronze {
		return
	}
	end := time.Unix(l.l.End, 0)
	if cut := s.reservedIn(l.gpus, l, Span{l.claimed, end}); !cut.IsZero() {
		end = cut
	}
	for _, i := range l.gpus {
		cs := s.gpus[i].commits
		for k := range cs {
			if cs[k].l == l {
				cs[k].end = end
			}
		}
	}
	if l.state == Awarded && end.Before(time.Unix(l.l.End, 0)) {
		// A backfill not started by the time its notice would have to
		// begin never starts: started later, it would get less notice or
		// hold up the reservation; unstarted, it would hold the GPU.
		if by := end.Add(-l.notice()); by.Before(l.deadline) {
			l.deadline = later(by, l.claimed)
		}
	}
	if l.ending == 0 { // one being stopped already needs no other notice
		s.arm(l, now)
		s.refresh(l)
	}
}

// LoadAt is Utilisation at a later instant at, as the calendar stands at
// now: the fraction of the sellable GPUs committed at at (for silver and
// gold, bronze counts as free). A lease's commitment counts for the span
// it was sold, not past its end as Utilisation's does at now, so a
// reservation is priced by the load at its window. at <= now is
// Utilisation(t, now). Newcomers' unstarted awards count as free (see
// newcomer.go).
func (s *Scheduler) LoadAt(t auction.Tier, at, now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	total, held := 0, 0
	for i := range s.gpus {
		g := &s.gpus[i]
		if !g.known || g.out != "" {
			continue
		}
		total++
		for _, c := range g.commits {
			if s.soft(c.l) {
				continue // a newcomer's unstarted award: displaceable, so free
			}
			span := c.at(now) // now: a lease past its end holds until released
			if at.After(now) {
				span = Span{c.start, c.end}
			}
			if span.contains(at) && (t == auction.Bronze || c.l.l.Tier != auction.Bronze) {
				held++
				break
			}
		}
	}
	if total == 0 {
		return 1
	}
	return float64(held) / float64(total)
}
