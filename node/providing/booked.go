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
