package offers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
)

// fakeBookings stands in for the scheduler: what it has sold, settable.
type fakeBookings struct {
	mu sync.Mutex
	bs []auction.Booking
}

func (f *fakeBookings) set(bs ...auction.Booking) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bs = bs
}

func (f *fakeBookings) booked(time.Time) []auction.Booking {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bs)
}

func newBookedProvider(t *testing.T) (*Publisher, *Market, *fakeBookings) {
	t.Helper()
	c := newBenchCluster(t, "latency25ms", false)
	c.addHosts(t, 1)
	m := startMarkets(t, c.hosts)[0]
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := newBenchProvider(t, ctx, m, 1_000_000)
	f := &fakeBookings{}
	p.SetBookings(f.booked)
	return p, m, f
}

// runBookedProvider is newBookedProvider with its publisher running (until
// the test ends) and its first offer out.
func runBookedProvider(t *testing.T) (*Publisher, *Market, *fakeBookings) {
	t.Helper()
	p, m, f := newBookedProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.Run(ctx)
	waitFor(t, 5*time.Second, "the first offer", func() bool { return p.Current() != nil })
	return p, m, f
}

// The offer carries the scheduler's bookings, as an offer may (capped at
// its GPUs), through signing and the wire into renters' books; a
// withdrawal carries none.
func TestPublisherAdvertisesBookings(t *testing.T) {
	p, m, f := newBookedProvider(t)
	ctx := context.Background()
	now := time.Now().Unix()
	// The simulated machine has one GPU: five booked is all of it.
	f.set(auction.Booking{Start: now + 3600, End: now + 7200, GPUs: 5})
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	want := []auction.Booking{{Start: now + 3600, End: now + 7200, GPUs: 1}}
	if got := p.Current().Booked; !slices.Equal(got, want) {
		t.Fatalf("offer booked %+v, want %+v", got, want)
	}
	o, _, ok := m.Book().Get(m.Host().ID().String())
	if !ok || !slices.Equal(o.Booked, want) {
		t.Fatalf("book holds %v %+v, want %+v", ok, o, want)
	}
	if free, ok := auction.NextFreeWindow(o, 1, time.Unix(now, 0)); !ok || free.End != now+3600 {
		t.Fatalf("renter's next free window %+v %v, want until the booking", free, ok)
	}

	if changed, _ := p.compareBookings(); changed {
		t.Fatal("unchanged bookings reported as changed")
	}
	// A change within auction.BookingsSlack of now (a lease overrunning its end)
	// is not worth an offer; one beyond it is. Only a change that frees
	// GPUs the offer shows booked counts as freeing them.
	f.set(auction.Booking{Start: now, End: now + 30, GPUs: 1}, auction.Booking{Start: now + 3600, End: now + 7200, GPUs: 1})
	if changed, _ := p.compareBookings(); changed {
		t.Fatal("a change within the slack reported")
	}
	f.set(auction.Booking{Start: now + 3600, End: now + 9000, GPUs: 1})
	if changed, freed := p.compareBookings(); !changed || freed {
		t.Fatalf("a longer booking: changed %v, freed %v; want changed, nothing freed", changed, freed)
	}
	f.set(auction.Booking{Start: now + 3600, End: now + 5400, GPUs: 1})
	if changed, freed := p.compareBookings(); !changed || !freed {
		t.Fatalf("a booking ended early: changed %v, freed %v; want both", changed, freed)
	}
	f.set()
	if changed, freed := p.compareBookings(); !changed || !freed {
		t.Fatalf("a released booking: changed %v, freed %v; want both", changed, freed)
	}

	// What bronze leases hold is watched and carried the same way, as
	// the offer's Bronze.
	bronze := &fakeBookings{}
	p.SetBronze(bronze.booked)
	f.set()
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	bronze.set(auction.Booking{Start: now + 60, End: now + 5400, GPUs: 1})
	if changed, freed := p.compareBookings(); !changed || freed {
		t.Fatalf("a new bronze lease: changed %v, freed %v; want changed, nothing freed", changed, freed)
	}
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.Current().Bronze; len(got) != 1 || got[0].End != now+5400 {
		t.Fatalf("offer bronze %+v, want the bronze lease", got)
	}
	if changed, _ := p.compareBookings(); changed {
		t.Fatal("unchanged bronze leases reported as changed")
	}
	bronze.set()
	if changed, freed := p.compareBookings(); !changed || !freed {
		t.Fatalf("a bronze lease ended: changed %v, freed %v; want both", changed, freed)
	}

	f.set(auction.Booking{Start: now + 3600, End: now + 7200, GPUs: 1})
	p.Withdraw(ctx)
	p.mu.Lock()
	raw := p.raw
	p.mu.Unlock()
	if w, _, err := auction.DecodeSignedOffer(raw, time.Now()); err != nil || !w.Withdrawn || w.Booked != nil || w.Bronze != nil {
		t.Fatalf("withdrawal %+v: %v", w, err)
	}
}

// Run republishes when the bookings change, promptly, and a burst of
// changes (awards arriving one after another) costs at most one
// publication per bookingsGap.
func TestPublisherRepublishesBookings(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for bookingsGap")
	}
	p, _, f := runBookedProvider(t)
	seq0, start := p.Seq(), time.Now()

	now := time.Now().Unix()
	var last auction.Booking
	for i := range int64(30) {
		last = auction.Booking{Start: now + 600, End: now + 3600 + 60*i, GPUs: 1}
		f.set(last)
		p.Refresh()
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, bookingsGap+3*bookingsPoll, "the last bookings in the offer", func() bool {
		o := p.Current()
		return o != nil && slices.Equal(o.Booked, []auction.Booking{last})
	})
	elapsed := time.Since(start)
	n, limit := p.Seq()-seq0, 1+uint64(elapsed/bookingsGap)
	if n > limit {
		t.Fatalf("%d publications in %v, limit %d", n, elapsed, limit)
	}
	t.Logf("%d publications for 30 changes in %v", n, elapsed)
}

// GPUs freed (a lease that ended long before its booked end) reach the
// offer within freedGap of the last publication, not bookingsGap, even
// right after it: otherwise every renter's book shows them booked and no
// renter asks for them. A new booking right after still waits for
// bookingsGap.
func TestPublisherRepublishesFreedGPUsPromptly(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for bookingsGap")
	}
	p, m, f := runBookedProvider(t)
	now := time.Now().Unix()
	booked := auction.Booking{Start: now, End: now + 3600, GPUs: 1}
	f.set(booked)
	p.Refresh()
	waitFor(t, bookingsGap+3*bookingsPoll, "the booking in the offer", func() bool {
		o := p.Current()
		return o != nil && len(o.Booked) == 1
	})

	f.set() // the lease ended at once
	p.Refresh()
	start := time.Now()
	self := m.Host().ID().String()
	// Within freedGap of the booking's publication, which came just
	// before (about 2 s here), with room for a loaded machine: not
	// bookingsGap later.
	waitFor(t, freedGap+2*time.Second, "the freed GPU in the offer and the book", func() bool {
		o, _, ok := m.Book().Get(self)
		return len(p.Current().Booked) == 0 && ok && len(o.Booked) == 0
	})
	t.Logf("the freed GPU was in the book %v after its lease ended", time.Since(start).Round(time.Millisecond))

	seq := p.Seq()
	f.set(auction.Booking{Start: now + 600, End: now + 3600, GPUs: 1})
	p.Refresh()
	time.Sleep(freedGap + bookingsPoll + 500*time.Millisecond)
	if got := p.Seq(); got != seq {
		t.Fatalf("a new booking was published (seq %d, then %d) within %v of the last publication; want it to wait for bookingsGap (%v)",
			seq, got, freedGap+bookingsPoll, bookingsGap)
	}
}

// A provider whose leases keep ending early (every 200 ms, a booked end
// brought a minute forward: GPU time freed each time) publishes at most
// once per freedGap: freed GPUs are published promptly, but never at
// more than half the rate renters' books accept from one provider
// (offerRate), however often they are freed. The last change still
// reaches the offer.
func TestPublisherFreesAtMostOncePerFreedGap(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for bookingsGap and freedGap")
	}
	p, _, f := runBookedProvider(t)
	now := time.Now().Unix()
	booking := func(i int64) auction.Booking { return auction.Booking{Start: now, End: now + 3600 - 60*i, GPUs: 1} }
	f.set(booking(0))
	p.Refresh()
	waitFor(t, bookingsGap+3*bookingsPoll, "the booking in the offer", func() bool {
		o := p.Current()
		return o != nil && len(o.Booked) == 1 && o.Booked[0].End == booking(0).End
	})

	seq0, start := p.Seq(), time.Now()
	const frees = 40
	for i := range int64(frees) {
		f.set(booking(i + 1))
		p.Refresh()
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, freedGap+2*bookingsPoll, "the last change in the offer", func() bool {
		o := p.Current()
		return o != nil && len(o.Booked) == 1 && o.Booked[0].End == booking(frees).End
	})
	elapsed := time.Since(start)
	// Half the rate renters' books accept from one provider.
	half := 2 * time.Duration(float64(time.Second)/float64(offerRate))
	n, limit := p.Seq()-seq0, 1+uint64(elapsed/half)
	if n > limit {
		t.Fatalf("%d publications in %v for %d frees, limit %d (one per %v, half of offerRate)", n, elapsed, frees, limit, half)
	}
	// The frees were published as they came, not left for bookingsGap.
	if least := uint64(elapsed/bookingsGap) + 2; n < least {
		t.Fatalf("%d publications in %v for %d frees: want at least %d", n, elapsed, frees, least)
	}
	t.Logf("%d publications for %d frees in %v", n, frees, elapsed)
}

// The offer lists the GPUs the owner's rules allowed by their device
// index, not by their place in the inventory: on a host whose GPUs are
// numbered 3 and 7 with only 7 allowed, 7 is offered (and not "every GPU
// is withdrawn", which reading Available as positions gave).
func TestPublisherOffersAllowedGPUsByIndex(t *testing.T) {
	p, _, _ := newBookedProvider(t)
	a := p.avail
	g := a.Inventory.GPUs[0]
	three, seven := g, g
	three.Index, three.UUID, three.Model = 3, g.UUID+"-3", "RTX4090"
	seven.Index, seven.UUID, seven.Model = 7, g.UUID+"-7", "H100"
	a.Inventory.GPUs = []attest.GPU{three, seven}
	a.Available, a.Withdrawn = []int{7}, map[int]string{3: "the owner is using it"}
	p.SetAvailability(a)
	if err := p.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := p.Current()
	if o == nil || len(o.GPUs) != 1 || o.GPUs[0].Model != "H100" || o.GPUs[0].UUIDHash != attest.UUIDHash(seven.UUID) {
		t.Fatalf("offer %+v, want GPU 7 (H100) alone", o)
	}
}
