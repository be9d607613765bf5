package provider

import (
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

func bookings(bs ...auction.Booking) []auction.Booking { return bs }

// book is a Booking of gpus from t0+a to t0+b.
func book(a, b time.Duration, gpus int) auction.Booking {
	return auction.Booking{Start: at(a).Unix(), End: at(b).Unix(), GPUs: gpus}
}

// claimLease claims l for an established renter (see mustClaim).
func claimLease(t *testing.T, s *Scheduler, l *auction.Lease, now time.Time, gpus ...int) {
	t.Helper()
	s.Establish(l.Renter)
	if _, err := s.Claim(l, gpus, now); err != nil {
		t.Fatalf("claim %s %v: %v", l.JobID, gpus, err)
	}
}

func checkBooked(t *testing.T, s *Scheduler, now time.Time, horizon time.Duration, want []auction.Booking) {
	t.Helper()
	if got := s.Booked(now, horizon); !slices.Equal(got, want) {
		t.Fatalf("booked at %v: %+v, want %+v", now.Sub(t0), got, want)
	}
}

// Silver and gold are booked per instant as counts; bronze is not, and a
// reservation books only its own window, leaving the gap before it free.
func TestBookedCountsSilverAndGold(t *testing.T) {
	s := newSched(4)
	week := 7 * 24 * time.Hour
	checkBooked(t, s, t0, week, nil)

	claimLease(t, s, mkLease("s", auction.Silver, 2, t0, time.Hour), t0, 0, 1)
	claimLease(t, s, mkLease("b", auction.Bronze, 1, t0, 3*time.Hour), t0, 2)
	claimLease(t, s, mkLease("g", auction.Gold, 3, at(2*time.Hour), time.Hour), t0, 0, 1, 3)
	checkBooked(t, s, t0, week, bookings(book(0, time.Hour, 2), book(2*time.Hour, 3*time.Hour, 3)))
	// The bronze lease is the offer's Bronze instead: what a silver or
	// gold lease there would preempt.
	if got, want := s.BronzeHeld(t0, week), bookings(book(0, 3*time.Hour, 1)); !slices.Equal(got, want) {
		t.Fatalf("bronze held %+v, want %+v", got, want)
	}

	// A second silver lease that runs into the reservation's window on
	// another GPU adds to its count there.
	claimLease(t, s, mkLease("s2", auction.Silver, 1, t0, 150*time.Minute), t0, 2)
	checkBooked(t, s, t0, week, bookings(
		book(0, time.Hour, 3), book(time.Hour, 2*time.Hour, 1),
		book(2*time.Hour, 150*time.Minute, 4), book(150*time.Minute, 3*time.Hour, 3)))

	// Seen later, the past is gone; the horizon clips the future.
	checkBooked(t, s, at(30*time.Minute), 135*time.Minute, bookings(
		book(30*time.Minute, time.Hour, 3), book(time.Hour, 2*time.Hour, 1),
		book(2*time.Hour, 150*time.Minute, 4), book(150*time.Minute, 165*time.Minute, 3)))
}

// Booked follows releases and the owner's withdrawals, and books a lease
// that has overrun its end until it is released.
func TestBookedFollowsReleaseAndWithdrawal(t *testing.T) {
	s := newSched(3)
	week := 7 * 24 * time.Hour
	claimLease(t, s, mkLease("a", auction.Silver, 1, t0, time.Hour), t0, 0)
	claimLease(t, s, mkLease("c", auction.Gold, 2, t0, 2*time.Hour), t0, 1, 2)
	checkBooked(t, s, t0, week, bookings(book(0, time.Hour, 3), book(time.Hour, 2*time.Hour, 2)))

	s.Release("a", at(time.Minute))
	checkBooked(t, s, at(time.Minute), week, bookings(book(time.Minute, 2*time.Hour, 2)))

	// The owner takes GPU 2 back: it leaves the offer, and so does what
	// it holds (gold runs out its lease there all the same).
	s.SetAvailability(availability(3, map[int]string{2: "owner's job"}), at(time.Minute))
	checkBooked(t, s, at(time.Minute), week, bookings(book(time.Minute, 2*time.Hour, 1)))

	// Past its end and not yet released, a lease still holds its GPU: for
	// the second that contains now.
	late := at(2*time.Hour + 500*time.Millisecond)
	checkBooked(t, s, late, week, bookings(book(2*time.Hour, 2*time.Hour+time.Second, 1)))
	s.Release("c", late)
	checkBooked(t, s, late, week, nil)
}
