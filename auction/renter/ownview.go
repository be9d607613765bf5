package renter

import (
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// OwnView is an offer book (Offers) corrected by what this renter knows of
// its own leases before their providers say so. A provider's offer tells
// the GPUs its leases hold (Offer.Bronze, Offer.Booked), but it is
// republished every few seconds at most and gossiped after that, so a
// renter that places a job the moment another of its own ended (a job
// array's next shard, as its sibling exits) finds the GPUs just freed shown
// busy, and those it just leased shown free. Preferring the offers whose
// GPUs look idle (preferUndisturbed), its round then asks only providers
// that are in fact full, finds no match, and waits for the book (Policy.
// Patience): seconds per shard (issue 36's array makespan).
//
// The view counts a lease it was told of (Took) as holding its GPUs, and
// one whose run ended (Freed) as holding them no more, in the offer of its
// provider, until the book holds a newer offer of that provider (a higher
// Seq than it held when the renter learned of the lease or its end): that
// offer was most likely issued after the change, which the provider knew
// of first, and tells it by itself. (Not the offer's IssuedAt, whole
// seconds: a provider republishes as a lease starts or ends, mostly within
// the second the renter learns of it, and the correction would count the
// change twice.)
// It is a hint for choosing whom to ask, nothing more: the provider still
// checks its capacity when asked, and declines or refuses what it cannot
// run (the round then goes on as it would have). Only leases made through
// this view are freed by it, so a node that restarted never frees GPUs it
// did not count as taken.
type OwnView struct {
	book Offers
	now  func() time.Time

	mu    sync.Mutex
	marks map[string][]ownMark  // by provider: corrections still in force
	taken map[leaseKey]struct{} // leases Took was told of whose runs have not ended
}

// ownMark is one correction of a provider's offer: GPUs held (positive)
// or freed (negative) over [Start, End) by a lease of tier, learned at
// unix second at, when the book's offer of the provider had sequence
// number seq (0: none).
type ownMark struct {
	at   int64
	seq  uint64
	tier auction.Tier
	b    auction.Booking
}

type leaseKey struct {
	job, provider string
	start         int64
}

// ownMarkTTL bounds how long a correction stands without its provider
// publishing again: past it the provider's offer (which lapses itself
// soon after) is taken as it is.
const ownMarkTTL = time.Minute

// NewOwnView is book corrected by this renter's own leases; now is the
// clock (nil: the wall clock).
func NewOwnView(book Offers, now func() time.Time) *OwnView {
	if now == nil {
		now = time.Now
	}
	return &OwnView{book: book, now: now, marks: map[string][]ownMark{}, taken: map[leaseKey]struct{}{}}
}

// Took records lease l, just co-signed: its GPUs are held from its start
// to its end.
func (v *OwnView) Took(l *auction.Lease) {
	if l == nil || l.GPUs <= 0 || l.End <= l.Start {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.taken[leaseKey{l.JobID, l.Provider, l.Start}] = struct{}{}
	v.mark(l.Provider, ownMark{at: v.now().Unix(), tier: l.Tier, b: auction.Booking{Start: l.Start, End: l.End, GPUs: l.GPUs}})
}

// Freed records that the run of lease l, which Took was told of, ended
// (the renter saw its exit): its GPUs are free from now on.
func (v *OwnView) Freed(l *auction.Lease) {
	if l == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	k := leaseKey{l.JobID, l.Provider, l.Start}
	if _, ok := v.taken[k]; !ok {
		return
	}
	delete(v.taken, k)
	now := v.now().Unix()
	if from := max(now, l.Start); from < l.End {
		v.mark(l.Provider, ownMark{at: now, tier: l.Tier, b: auction.Booking{Start: from, End: l.End, GPUs: -l.GPUs}})
	}
}

func (v *OwnView) mark(provider string, m ownMark) {
	m.seq = v.seqOf(provider)
	v.marks[provider] = append(v.marks[provider], m)
}

// seqOf is the sequence number of provider's offer in the book, 0 if none.
func (v *OwnView) seqOf(provider string) uint64 {
	if b, ok := v.book.(interface {
		Get(string) (*auction.Offer, []byte, bool)
	}); ok {
		if o, _, ok := b.Get(provider); ok {
			return o.Seq
		}
		return 0
	}
	for _, o := range v.book.Snapshot() {
		if o != nil && o.Provider == provider {
			return o.Seq
		}
	}
	return 0
}

// Snapshot is the book's offers, each of a provider with corrections in
// force replaced by a corrected copy; the book's offers are not changed.
func (v *OwnView) Snapshot() []*auction.Offer {
	offers := v.book.Snapshot()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.marks) == 0 {
		return offers
	}
	now := v.now()
	stale := now.Add(-ownMarkTTL).Unix()
	for p, ms := range v.marks {
		v.marks[p] = slices.DeleteFunc(ms, func(m ownMark) bool { return m.at < stale })
		if len(v.marks[p]) == 0 {
			delete(v.marks, p)
		}
	}
	for i, o := range offers {
		if o == nil || len(v.marks[o.Provider]) == 0 {
			continue
		}
		// An offer newer than the one the book held when the renter
		// learned of a lease or its end tells of it by itself.
		ms := slices.DeleteFunc(v.marks[o.Provider], func(m ownMark) bool { return o.Seq > m.seq })
		if len(ms) == 0 {
			delete(v.marks, o.Provider)
			continue
		}
		v.marks[o.Provider] = ms
		offers[i] = corrected(o, ms, now.Unix())
	}
	return offers
}

// corrected is a copy of o with ms applied to what its bronze leases
// (Bronze) and its silver and gold leases (Booked) hold, from now on.
func corrected(o *auction.Offer, ms []ownMark, now int64) *auction.Offer {
	var bronze, booked []auction.Booking
	for _, m := range ms {
		if m.tier == auction.Bronze {
			bronze = append(bronze, m.b)
		} else {
			booked = append(booked, m.b)
		}
	}
	c := *o
	if len(bronze) > 0 {
		c.Bronze = applyBookings(o.Bronze, bronze, len(o.GPUs), now)
	}
	if len(booked) > 0 {
		c.Booked = applyBookings(o.Booked, booked, len(o.GPUs), now)
	}
	return &c
}

// applyBookings is held (sorted, non-overlapping) plus the signed changes
// delta, from now on, each span's count kept within [0, total]: sorted,
// non-overlapping, without empty spans, adjacent equal spans joined, as
// an offer carries them. What held says before now is kept as it was.
func applyBookings(held, delta []auction.Booking, total int, now int64) []auction.Booking {
	cuts := []int64{now}
	for _, b := range held {
		cuts = append(cuts, b.Start, b.End)
	}
	for _, d := range delta {
		cuts = append(cuts, d.Start, d.End)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []auction.Booking
	for i := 0; i+1 < len(cuts); i++ {
		from, to := cuts[i], cuts[i+1]
		n := 0
		for _, b := range held {
			if b.Start <= from && to <= b.End {
				n += b.GPUs
			}
		}
		if from >= now {
			for _, d := range delta {
				if d.Start <= from && to <= d.End {
					n += d.GPUs
				}
			}
		}
		n = min(max(n, 0), total)
		if n == 0 {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].End == from && out[k].GPUs == n {
			out[k].End = to
			continue
		}
		out = append(out, auction.Booking{Start: from, End: to, GPUs: n})
	}
	return out
}
