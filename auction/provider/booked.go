package provider

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Booked summarises what the offer should advertise as sold over
// [now, now+horizon): per instant, how many sellable GPUs silver and gold
// leases hold, in whole seconds rounded outward, merged and bounded as an
// offer carries them (auction.NormalizeBookings). Bronze is left out: it
// yields to any other lease; so are newcomers' unstarted awards, which
// another award displaces (see newcomer.go), or a throwaway identity
// could hide the machine from the market for nothing. A withdrawn GPU is
// not in the offer, so what it holds is not either.
func (s *Scheduler) Booked(now time.Time, horizon time.Duration) []auction.Booking {
	return s.held(now, horizon, func(l *lease) bool { return l.l.Tier != auction.Bronze && !s.soft(l) })
}

// BronzeHeld is what the offer advertises as held by bronze leases
// (auction.Offer.Bronze), in Booked's form: a renter of any tier sees
// those GPUs as busy now, and one of silver or gold prefers GPUs it would
// not have to preempt a bronze job for.
func (s *Scheduler) BronzeHeld(now time.Time, horizon time.Duration) []auction.Booking {
	return s.held(now, horizon, func(l *lease) bool { return l.l.Tier == auction.Bronze })
}

// held sums, per instant, the sellable GPUs that leases for which keep
// holds commit, as Booked describes. keep is called with s.mu held.
func (s *Scheduler) held(now time.Time, horizon time.Duration, keep func(*lease) bool) []auction.Booking {
	from, to := now.Unix(), now.Add(horizon).Unix()
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	s.mu.Lock()
	sellable := 0
	for i := range s.gpus {
		g := &s.gpus[i]
		if !g.known || g.out != "" {
			continue
		}
		sellable++
		// One GPU's spans, united first, so that it counts once however
		// its commitments touch.
		var spans []auction.Window
		for _, c := range g.commits {
			if !keep(c.l) {
				continue
			}
			sp := c.at(now)
			start, end := sp.Start.Unix(), ceilUnix(sp.End)
			if start, end = max(start, from), min(end, to); start < end {
				spans = append(spans, auction.Window{Start: start, End: end})
			}
		}
		for _, w := range mergeWindows(spans) {
			edges = append(edges, edge{w.Start, 1}, edge{w.End, -1})
		}
	}
	s.mu.Unlock()
	// Ends sort before starts at one instant, so that a GPU handed from one
	// lease to the next is not counted twice there.
	slices.SortFunc(edges, func(a, b edge) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	var out []auction.Booking
	n := 0
	for i, e := range edges {
		n += e.delta
		if i+1 < len(edges) && edges[i+1].at == e.at {
			continue // settle every edge at this instant first
		}
		if n > 0 && i+1 < len(edges) {
			out = append(out, auction.Booking{Start: e.at, End: edges[i+1].at, GPUs: n})
		}
	}
	return auction.NormalizeBookings(out, max(sellable, 1), from, math.MaxInt64)
}

// ceilUnix is t in unix seconds, rounded up: a booking that ends within a
// second is booked for all of it.
func ceilUnix(t time.Time) int64 {
	if t.Nanosecond() > 0 {
		return t.Unix() + 1
	}
	return t.Unix()
}
