package auction

import (
	"testing"
	"time"
)

// CompareBookings looks from BookingsSlack after now to the horizon's end:
// a change inside the slack, or past the end, is no change; one after it
// is, and is freeing only where the published bookings show more booked.
func TestCompareBookings(t *testing.T) {
	now := time.Unix(1_000_000, 400_000_000) // a fraction of a second past, as clocks are
	at := func(d time.Duration) int64 { return now.Truncate(time.Second).Add(d).Unix() }
	end := at(time.Hour)
	lease := Booking{Start: at(0), End: at(30 * time.Minute), GPUs: 2}
	for _, c := range []struct {
		name                   string
		actual, published      []Booking
		wantChanged, wantFreed bool
	}{
		{name: "the same", actual: []Booking{lease}, published: []Booking{lease}},
		{name: "ended within the slack of now",
			actual: []Booking{{lease.Start, at(BookingsSlack - time.Second), 2}}, published: []Booking{{lease.Start, at(BookingsSlack / 2), 2}}},
		{name: "ended early",
			actual: []Booking{{lease.Start, at(10 * time.Minute), 2}}, published: []Booking{lease}, wantChanged: true, wantFreed: true},
		{name: "released", published: []Booking{lease}, wantChanged: true, wantFreed: true},
		{name: "a new lease", actual: []Booking{lease, {at(40 * time.Minute), at(50 * time.Minute), 1}}, published: []Booking{lease}, wantChanged: true},
		{name: "a new lease past the horizon", actual: []Booking{lease, {end, end + 600, 1}}, published: []Booking{lease}},
		{name: "a lease extended past the slack",
			actual: []Booking{{lease.Start, at(BookingsSlack + 2*time.Second), 2}}, published: []Booking{{lease.Start, at(BookingsSlack), 2}}, wantChanged: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed, freed := CompareBookings(c.actual, c.published, 4, now, end)
			if changed != c.wantChanged || freed != c.wantFreed {
				t.Fatalf("CompareBookings = changed %v, freed %v; want %v, %v", changed, freed, c.wantChanged, c.wantFreed)
			}
		})
	}
}
