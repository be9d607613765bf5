package auction

import "time"

// A provider republishes its offer when its scheduler's bookings move
// away from those the offer shows, at a pace both node's publisher
// (node/offers) and the simulator's providers (testnet/sim) take from
// here, so that what is simulated is what nodes do.
//
// A change waits until BookingsGap has passed since the last
// publication, which coalesces a burst of awards into one offer and keeps
// a busy provider's gossip near the hourly re-announcement rather than at
// renters' flood limit. A change that frees GPUs the offer shows booked
// (a lease that ended before its booked end, a released award) waits
// only FreedGap. The two errors an offer can make do not cost the same:
// one that shows GPUs free that are booked costs a renter one declined
// quote ("fully utilised"), and it asks the others; one that shows freed
// GPUs booked hides them from every renter's book, so none asks, and
// jobs end in no match or back off while the GPUs idle (issue 33's burst:
// a round of short jobs that ended left the cheapest provider shown full,
// and the burst's tail waited 10 s for its offer). FreedGap is twice the
// interval of renters' flood limit (one offer a second from a provider),
// so a provider whose short jobs end every second stays within it.
//
// A change within BookingsSlack of now (a lease overrunning its end by a
// second) is not worth an offer.
const (
	BookingsGap   = 10 * time.Second
	FreedGap      = 2 * time.Second
	BookingsSlack = time.Minute
)

// CompareBookings reports whether a provider's actual bookings differ
// from those its offer of gpus GPUs published, from now+BookingsSlack to
// end (the offer's horizon), and whether the published ones show GPUs
// booked that actual has freed (BookingsFreed).
func CompareBookings(actual, published []Booking, gpus int, now time.Time, end int64) (changed, freed bool) {
	from := now.Add(BookingsSlack).Unix()
	if !BookingsDiffer(actual, published, gpus, from, end) {
		return false, false
	}
	return true, BookingsFreed(actual, published, gpus, from, end)
}

// BookingsChanged is CompareBookings for o, the offer a provider
// published last, against its scheduler's bookings and bronze holds now:
// over o's GPUs, to o's horizon (its issue plus horizon), either list
// changed, and either shows GPUs freed.
func (o *Offer) BookingsChanged(booked, bronze []Booking, now time.Time, horizon time.Duration) (changed, freed bool) {
	end := o.IssuedAt + int64(horizon/time.Second)
	c1, f1 := CompareBookings(booked, o.Booked, len(o.GPUs), now, end)
	c2, f2 := CompareBookings(bronze, o.Bronze, len(o.GPUs), now, end)
	return c1 || c2, f1 || f2
}
