package providing

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/offers"
)

// Booked is what the offer advertises as sold from now to the offer's
// horizon: the scheduler's silver and gold commitments, per instant. The
// publisher polls it (offers.Publisher.SetBookings).
func (pj *Provider) Booked(now time.Time) []auction.Booking {
	return pj.sched.Booked(now, offers.OfferHorizon)
}

// BronzeHeld is what the offer advertises as held by bronze leases
// (auction.Offer.Bronze), polled like Booked (offers.Publisher.SetBronze).
func (pj *Provider) BronzeHeld(now time.Time) []auction.Booking {
	return pj.sched.BronzeHeld(now, offers.OfferHorizon)
}
