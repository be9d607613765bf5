package auction

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"
)

// An offer's free capacity at an instant is its GPU count inside a window
// and none outside, less what is booked then. Both lists are sorted and
// non-overlapping (Validate), so one merged walk over their edges reads
// it without allocating: the book runs it per offer for `free` clauses.

// NextFreeWindow is the first stretch, from now on, in which o has gpus
// GPUs neither outside its windows nor booked: it starts at now or at the
// first edge after it where enough GPUs come free, and ends where too few
// are left (touching windows count as one). False when there is none
// within the offer's horizon, or gpus is more than o has.
func NextFreeWindow(o *Offer, gpus int, now time.Time) (Window, bool) {
	return nextFree(o.Windows, o.Booked, len(o.GPUs), gpus, now.Unix())
}

// nextFree is NextFreeWindow over the offer's parts: windows ws, bookings
// bs, total GPUs, n of them wanted (at least one).
func nextFree(ws []Window, bs []Booking, total, n int, now int64) (Window, bool) {
	n = max(n, 1)
	if n > total {
		return Window{}, false
	}
	wi := sort.Search(len(ws), func(i int) bool { return ws[i].End > now })
	bi := sort.Search(len(bs), func(i int) bool { return bs[i].End > now })
	start, found := int64(0), false
	for t := now; ; {
		for wi < len(ws) && ws[wi].End <= t {
			wi++
		}
		for bi < len(bs) && bs[bi].End <= t {
			bi++
		}
		inWindow := wi < len(ws) && ws[wi].Start <= t
		booked := 0
		if bi < len(bs) && bs[bi].Start <= t {
			booked = bs[bi].GPUs
		}
		free := inWindow && total-booked >= n
		switch {
		case free && !found:
			start, found = t, true
		case !free && found:
			return Window{start, t}, true
		}
		// The next edge after t: capacity is constant until then.
		next := int64(math.MaxInt64)
		if wi < len(ws) {
			next = ws[wi].Start
			if inWindow {
				next = ws[wi].End
			}
		}
		if bi < len(bs) {
			if bs[bi].Start <= t {
				next = min(next, bs[bi].End)
			} else {
				next = min(next, bs[bi].Start)
			}
		}
		if next == math.MaxInt64 {
			// Past every edge: outside any window, so nothing is free, and
			// a free stretch (which lies in a window) has ended above.
			return Window{}, false
		}
		t = next
	}
}

// bookedPeak is the most GPUs bs books at any instant of [from, to).
func bookedPeak(bs []Booking, from, to int64) int {
	peak := 0
	for i := sort.Search(len(bs), func(i int) bool { return bs[i].End > from }); i < len(bs) && bs[i].Start < to; i++ {
		peak = max(peak, bs[i].GPUs)
	}
	return peak
}

// FreeFor reports whether bookings leave o gpus GPUs over [from, to)
// throughout. It reads bookings only; whether the windows cover the span
// is the calendar's question (AvailableFor).
func (o *Offer) FreeFor(gpus int, from, to time.Time) bool {
	return len(o.GPUs)-bookedPeak(o.Booked, from.Unix(), to.Unix()) >= gpus
}

// BookingsDiffer reports whether bookings a and b differ once both are
// normalised for gpus GPUs over [from, to): a provider's test of whether
// its scheduler's bookings have moved away from those it published.
func BookingsDiffer(a, b []Booking, gpus int, from, to int64) bool {
	return !slices.Equal(NormalizeBookings(a, gpus, from, to), NormalizeBookings(b, gpus, from, to))
}

// BookingsFreed reports whether bookings published show more GPUs booked
// than actual at some instant of [from, to), both normalised for gpus
// GPUs: a provider's test of whether the offer it published hides GPUs it
// has since freed (a lease that ended early, a released award). Such an
// offer costs the whole market, not only the provider: renters' books
// rule those GPUs out, so no renter even asks for them.
func BookingsFreed(actual, published []Booking, gpus int, from, to int64) bool {
	a := NormalizeBookings(actual, gpus, from, to)
	i := 0
	for _, p := range NormalizeBookings(published, gpus, from, to) {
		// Normalised bookings are sorted and do not overlap: walk the
		// actual ones across p's span, and any gap or lower count in it
		// is a GPU freed.
		for t := p.Start; t < p.End; t = a[i].End {
			for i < len(a) && a[i].End <= t {
				i++
			}
			if i == len(a) || a[i].Start > t || a[i].GPUs < p.GPUs {
				return true
			}
		}
	}
	return false
}

// NormalizeBookings makes bs, counts of GPUs booked per instant, into what
// an offer of gpus GPUs may carry for [from, to): sorted, clipped to the
// span, counts capped at gpus, touching bookings of one count joined, and
// at most MaxBookings of them. Where it must coarsen (overlapping input,
// too many bookings) it unites at the higher count, so that an offer may
// overstate what is booked but never understate it: a renter who believes
// a GPU free when it is not wastes an auction, the other way round only
// misses one.
func NormalizeBookings(bs []Booking, gpus int, from, to int64) []Booking {
	if !slices.IsSortedFunc(bs, byStart) {
		bs = slices.SortedFunc(slices.Values(bs), byStart)
	}
	var out []Booking
	for _, b := range bs {
		b.Start, b.End, b.GPUs = max(b.Start, from), min(b.End, to), min(b.GPUs, gpus)
		if b.Start >= b.End || b.GPUs < 1 {
			continue
		}
		n := len(out)
		if n == 0 {
			out = append(out, b)
			continue
		}
		last := &out[n-1]
		switch {
		case b.Start < last.End || n == MaxBookings:
			last.End, last.GPUs = max(last.End, b.End), max(last.GPUs, b.GPUs)
		case b.Start == last.End && b.GPUs == last.GPUs:
			last.End = b.End
		default:
			out = append(out, b)
		}
	}
	return out
}

func byStart(a, b Booking) int { return cmp.Compare(a.Start, b.Start) }

// Undisturbed reports whether spec's job, placed on o now, would take no
// other job's GPUs and, as far as the offer can tell, keep its own to the
// end: over the span the job holds its GPUs (bronze: from now for its
// expected duration; silver: from now for its maximum; gold: its
// reservation) the offer's windows are open and its GPUs less what silver,
// gold and bronze leases hold (Booked, Bronze) cover the job. Feasibility
// admits more than this (bronze wherever a window is open now, silver and
// gold over bronze jobs they would preempt); it is the renter's
// preference among feasible offers (issue 33's placement that respects
// windows: a bronze job placed where the window closes or a booked lease
// begins before it ends loses its work since its last checkpoint, and a
// silver job placed over a bronze one costs that job its work).
func Undisturbed(o *Offer, spec *JobSpec, now time.Time) bool {
	from, secs := now.Unix(), int64(spec.Duration.Max/time.Second)
	switch spec.Tier {
	case Bronze:
		secs = int64(spec.Duration.Expected / time.Second)
	case Gold:
		if !spec.Start.IsZero() {
			from = spec.Start.Unix()
		}
	}
	secs = max(secs, 1)
	if availableSecs(o.Windows, from) < secs {
		return false
	}
	to := from + secs
	return len(o.GPUs)-bookedPeak(o.Booked, from, to)-bookedPeak(o.Bronze, from, to) >= spec.Resources.GPUs
}

// FreeNow is how many of o's GPUs no lease holds at now: inside a window,
// less what silver, gold (Booked) and bronze (Bronze) leases hold then.
func FreeNow(o *Offer, now time.Time) int {
	t := now.Unix()
	if availableSecs(o.Windows, t) <= 0 {
		return 0
	}
	return max(0, len(o.GPUs)-bookedPeak(o.Booked, t, t+1)-bookedPeak(o.Bronze, t, t+1))
}
