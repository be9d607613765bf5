package auction

import (
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// randomBookings books some of o's GPUs over a few half-hour-aligned
// spans from issue on, sorted and possibly touching, for the query
// property test; half of all offers book nothing.
func randomBookings(r *rand.Rand, o *Offer) []Booking {
	if r.Intn(2) == 0 {
		return nil
	}
	var bs []Booking
	at := o.IssuedAt + int64(r.Intn(4))*1800
	for n := 1 + r.Intn(5); n > 0; n-- {
		end := at + int64(1+r.Intn(16))*1800
		gpus := len(o.GPUs)
		if r.Intn(2) == 0 {
			gpus = 1 + r.Intn(len(o.GPUs))
		}
		bs = append(bs, Booking{at, end, gpus})
		at = end + int64(r.Intn(3))*1800 // 0 = touching
	}
	return bs
}

func TestNextFreeWindow(t *testing.T) {
	const h = 3600
	now := t0.Unix()
	w := func(a, b int64) Window { return Window{now + a*h, now + b*h} }
	bk := func(a, b int64, gpus int) Booking { return Booking{now + a*h, now + b*h, gpus} }
	for _, c := range []struct {
		name    string
		windows []Window
		booked  []Booking
		gpus    int     // of the offer's 4
		want    *Window // nil: none
	}{
		{name: "nothing booked", windows: []Window{w(0, 8)}, gpus: 4, want: &Window{now, now + 8*h}},
		{name: "every GPU booked from now", windows: []Window{w(0, 8)}, booked: []Booking{bk(0, 3, 4)}, gpus: 1, want: &Window{now + 3*h, now + 8*h}},
		{name: "partly booked leaves enough", windows: []Window{w(0, 8)}, booked: []Booking{bk(0, 3, 2)}, gpus: 2, want: &Window{now, now + 8*h}},
		{name: "partly booked leaves too few", windows: []Window{w(0, 8)}, booked: []Booking{bk(0, 3, 2)}, gpus: 3, want: &Window{now + 3*h, now + 8*h}},
		{name: "a later booking ends the stretch", windows: []Window{w(0, 8)}, booked: []Booking{bk(2, 3, 4)}, gpus: 1, want: &Window{now, now + 2*h}},
		{name: "touching bookings of different counts", windows: []Window{w(0, 8)},
			booked: []Booking{bk(0, 2, 1), bk(2, 4, 3), bk(4, 5, 1)}, gpus: 2, want: &Window{now, now + 2*h}},
		{name: "touching bookings, every GPU wanted", windows: []Window{w(0, 8)},
			booked: []Booking{bk(0, 2, 1), bk(2, 4, 3), bk(4, 5, 1)}, gpus: 4, want: &Window{now + 5*h, now + 8*h}},
		{name: "touching bookings, free between them", windows: []Window{w(0, 8)},
			booked: []Booking{bk(0, 2, 3), bk(2, 4, 1), bk(4, 5, 3)}, gpus: 2, want: &Window{now + 2*h, now + 4*h}},
		{name: "not in a window now", windows: []Window{w(2, 5)}, gpus: 4, want: &Window{now + 2*h, now + 5*h}},
		{name: "the window ends", windows: []Window{w(-1, 2), w(3, 4)}, gpus: 1, want: &Window{now, now + 2*h}},
		{name: "touching windows are one", windows: []Window{w(0, 2), w(2, 6)}, gpus: 1, want: &Window{now, now + 6*h}},
		{name: "booked to the window's end", windows: []Window{w(0, 4), w(6, 9)}, booked: []Booking{bk(0, 4, 4)}, gpus: 1, want: &Window{now + 6*h, now + 9*h}},
		// A booking across a window's edge: the window's free part after it
		// is what remains, and the booking's part outside windows is moot.
		{name: "booking across a window's start", windows: []Window{w(2, 6)}, booked: []Booking{bk(1, 3, 4)}, gpus: 1, want: &Window{now + 3*h, now + 6*h}},
		{name: "booking across a window's end", windows: []Window{w(0, 4), w(5, 8)}, booked: []Booking{bk(3, 6, 4)}, gpus: 1, want: &Window{now, now + 3*h}},
		{name: "booking across the gap into the next window", windows: []Window{w(0, 4), w(5, 8)}, booked: []Booking{bk(0, 6, 4)}, gpus: 1, want: &Window{now + 6*h, now + 8*h}},
		{name: "past bookings do not count", windows: []Window{w(-3, 3)}, booked: []Booking{bk(-3, 0, 4)}, gpus: 4, want: &Window{now, now + 3*h}},
		{name: "fully booked to the horizon", windows: []Window{w(0, 4)}, booked: []Booking{bk(0, 4, 4)}, gpus: 1},
		{name: "no windows left", windows: []Window{w(-2, -1)}, gpus: 1},
		{name: "more GPUs than the offer has", windows: []Window{w(0, 4)}, gpus: 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := validOffer(fakeID(1), t0)
			o.GPUs = slices.Repeat(o.GPUs[:1], 4)
			o.Windows, o.Booked = c.windows, c.booked
			got, ok := NextFreeWindow(o, c.gpus, t0)
			switch {
			case c.want == nil && ok:
				t.Fatalf("got %+v, want none", got)
			case c.want != nil && (!ok || got != *c.want):
				t.Fatalf("got %+v %v, want %+v", got, ok, *c.want)
			}
		})
	}
}

func TestOfferFreeFor(t *testing.T) {
	o := validOffer(fakeID(1), t0) // 2 GPUs
	s := t0.Unix()
	o.Booked = []Booking{{s + 3600, s + 7200, 1}, {s + 7200, s + 9000, 2}}
	at := func(sec int64) time.Time { return time.Unix(s+sec, 0) }
	for _, c := range []struct {
		from, to int64
		gpus     int
		want     bool
	}{
		{0, 3600, 2, true},     // ends as the booking starts
		{0, 3601, 2, false},    // one second into it
		{0, 7200, 1, true},     // one left throughout
		{3600, 7201, 1, false}, // reaches the full booking
		{9000, 20000, 2, true}, // after everything
	} {
		if got := o.FreeFor(c.gpus, at(c.from), at(c.to)); got != c.want {
			t.Errorf("FreeFor(%d, +%d, +%d) = %v, want %v", c.gpus, c.from, c.to, got, c.want)
		}
	}
}

func TestNormalizeBookings(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []Booking
		gpus int
		want []Booking
	}{
		{name: "clipped and capped", in: []Booking{{-5, 5, 9}, {95, 105, 1}}, gpus: 4, want: []Booking{{0, 5, 4}, {95, 100, 1}}},
		{name: "touching equal counts joined", in: []Booking{{10, 20, 2}, {20, 30, 2}, {30, 40, 1}}, gpus: 4, want: []Booking{{10, 30, 2}, {30, 40, 1}}},
		{name: "unsorted input sorted", in: []Booking{{30, 40, 1}, {10, 20, 2}}, gpus: 4, want: []Booking{{10, 20, 2}, {30, 40, 1}}},
		{name: "overlaps united at the higher count", in: []Booking{{10, 30, 1}, {20, 40, 3}}, gpus: 4, want: []Booking{{10, 40, 3}}},
		{name: "empty and out of range dropped", in: []Booking{{10, 10, 1}, {200, 300, 1}, {50, 60, 0}}, gpus: 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NormalizeBookings(c.in, c.gpus, 0, 100); !slices.Equal(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	// Too many: the tail is folded into the last, overstating, and the
	// result is one an offer may carry.
	var many []Booking
	for i := range int64(MaxBookings + 10) {
		many = append(many, Booking{i * 10, i*10 + 5, 1 + int(i%2)})
	}
	got := NormalizeBookings(many, 2, 0, 1<<40)
	if len(got) != MaxBookings {
		t.Fatalf("%d bookings, want %d", len(got), MaxBookings)
	}
	if last := got[len(got)-1]; last.End != many[len(many)-1].End || last.GPUs != 2 {
		t.Fatalf("last booking %+v does not cover the rest at the higher count", last)
	}
	o := validOffer(fakeID(1), t0)
	o.Booked = NormalizeBookings(many, len(o.GPUs), o.IssuedAt, o.ExpiresAt)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBookingsFreed(t *testing.T) {
	for _, c := range []struct {
		name              string
		actual, published []Booking
		want              bool
	}{
		{name: "the same", actual: []Booking{{10, 20, 2}}, published: []Booking{{10, 20, 2}}},
		{name: "none either way"},
		{name: "a lease ended early", actual: []Booking{{10, 15, 2}}, published: []Booking{{10, 20, 2}}, want: true},
		{name: "a lease released", published: []Booking{{10, 20, 2}}, want: true},
		{name: "fewer GPUs", actual: []Booking{{10, 20, 1}}, published: []Booking{{10, 20, 2}}, want: true},
		{name: "a gap inside", actual: []Booking{{10, 14, 2}, {16, 20, 2}}, published: []Booking{{10, 20, 2}}, want: true},
		{name: "a new lease only", actual: []Booking{{10, 20, 2}, {30, 40, 1}}, published: []Booking{{10, 20, 2}}},
		{name: "a longer lease only", actual: []Booking{{10, 30, 2}}, published: []Booking{{10, 20, 2}}},
		{name: "more GPUs only", actual: []Booking{{10, 20, 3}}, published: []Booking{{10, 20, 2}}},
		{name: "covered by two", actual: []Booking{{5, 15, 2}, {15, 25, 3}}, published: []Booking{{10, 20, 2}}},
		{name: "freed outside the span", actual: []Booking{{10, 20, 2}}, published: []Booking{{10, 20, 2}, {150, 160, 1}}},
		{name: "one of two freed", actual: []Booking{{10, 20, 2}}, published: []Booking{{10, 20, 2}, {30, 40, 1}}, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := BookingsFreed(c.actual, c.published, 4, 0, 100); got != c.want {
				t.Fatalf("BookingsFreed = %v, want %v", got, c.want)
			}
		})
	}
	// Against counting every instant, on random bookings.
	r := rand.New(rand.NewSource(1))
	random := func() []Booking {
		var bs []Booking
		for range r.Intn(5) {
			s := r.Int63n(100)
			bs = append(bs, Booking{s, s + 1 + r.Int63n(30), 1 + r.Intn(4)})
		}
		return bs
	}
	count := func(bs []Booking, t int64) int {
		for _, b := range NormalizeBookings(bs, 4, 0, 100) {
			if b.Start <= t && t < b.End {
				return b.GPUs
			}
		}
		return 0
	}
	for range 2000 {
		a, p := random(), random()
		want := false
		for t := range int64(100) {
			want = want || count(p, t) > count(a, t)
		}
		if got := BookingsFreed(a, p, 4, 0, 100); got != want {
			t.Fatalf("BookingsFreed(%+v, %+v) = %v, want %v", a, p, got, want)
		}
	}
}

func TestOfferValidateBooked(t *testing.T) {
	s := t0.Unix()
	for _, c := range []struct {
		name   string
		booked []Booking
		err    string // "" = valid
	}{
		{name: "none"},
		{name: "touching", booked: []Booking{{s, s + 60, 1}, {s + 60, s + 120, 2}}},
		{name: "to the horizon", booked: []Booking{{s, s + 3600 + int64(WindowHorizon/time.Second), 2}}},
		{name: "empty span", booked: []Booking{{s + 60, s + 60, 1}}, err: "booked[0]: start not before end"},
		{name: "reversed", booked: []Booking{{s + 60, s, 1}}, err: "booked[0]: start not before end"},
		{name: "overlapping", booked: []Booking{{s, s + 120, 1}, {s + 60, s + 180, 1}}, err: "booked[1]: overlaps"},
		{name: "unsorted", booked: []Booking{{s + 600, s + 700, 1}, {s, s + 60, 1}}, err: "booked[1]: overlaps"},
		{name: "before issue", booked: []Booking{{s - 1, s + 60, 1}}, err: "booked[0]: must lie within"},
		{name: "past the horizon", booked: []Booking{{s, s + 3601 + int64(WindowHorizon/time.Second), 1}}, err: "booked[0]: must lie within"},
		{name: "no GPUs", booked: []Booking{{s, s + 60, 0}}, err: "booked[0].gpus: 0, want 1..2"},
		{name: "negative GPUs", booked: []Booking{{s, s + 60, -1}}, err: "booked[0].gpus"},
		{name: "more GPUs than offered", booked: []Booking{{s, s + 60, 3}}, err: "booked[0].gpus: 3, want 1..2"},
		{name: "too many", booked: func() []Booking {
			var bs []Booking
			for i := range int64(MaxBookings + 1) {
				bs = append(bs, Booking{s + 2*i, s + 2*i + 1, 1})
			}
			return bs
		}(), err: "booked: 257 bookings, limit 256"},
	} {
		// Bronze (what bronze leases hold) is held to the same rules.
		for _, field := range []string{"booked", "bronze"} {
			t.Run(field+"/"+c.name, func(t *testing.T) {
				o := validOffer(fakeID(1), t0)
				want := c.err
				if field == "bronze" {
					o.Bronze = c.booked
					want = strings.Replace(want, "booked", "bronze", 1)
				} else {
					o.Booked = c.booked
				}
				err := o.Validate()
				switch {
				case want == "" && err != nil:
					t.Fatalf("rejected: %v", err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Fatalf("got %v, want %q", err, want)
				}
			})
		}
	}
}

// TestOfferBookedRoundTrip: bookings survive signing and decoding, so
// renters see what the provider advertised.
func TestOfferBookedRoundTrip(t *testing.T) {
	key, id := testKey(t, 1)
	o := validOffer(id, t0)
	o.Booked = []Booking{{t0.Unix(), t0.Unix() + 600, 2}, {t0.Unix() + 600, t0.Unix() + 900, 1}}
	o.Bronze = []Booking{{t0.Unix() + 60, t0.Unix() + 1200, 1}}
	s, err := SignOffer(o, key)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := s.Marshal()
	got, _, err := DecodeSignedOffer(raw, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Booked, o.Booked) || !slices.Equal(got.Bronze, o.Bronze) {
		t.Fatalf("booked %+v, bronze %+v, want %+v, %+v", got.Booked, got.Bronze, o.Booked, o.Bronze)
	}
}

func TestCheckBooked(t *testing.T) {
	id := fakeID(1)
	s, h := t0.Unix(), int64(3600)
	silver := func(sp *JobSpec) { sp.Tier, sp.MaxPrice = Silver, 2_000_000 }
	for _, c := range []struct {
		name   string
		spec   func(*JobSpec)
		booked []Booking // of validOffer's 2 GPUs, windows [t0, t0+8h) and [t0+20h, t0+30h)
		reject bool
	}{
		{name: "bronze, every GPU booked now", booked: []Booking{{s, s + h, 2}}, reject: true},
		{name: "bronze, one GPU booked now, job wants two", booked: []Booking{{s, s + h, 1}}, reject: true},
		{name: "bronze, one GPU booked now, job wants one", spec: func(sp *JobSpec) { sp.Resources.GPUs = 1 }, booked: []Booking{{s, s + h, 1}}},
		// Bronze yields: it may backfill until a reservation that starts later.
		{name: "bronze before a later booking", booked: []Booking{{s + h, s + 2*h, 2}}},
		{name: "silver into a later booking", spec: silver, booked: []Booking{{s + 3*h, s + 4*h, 2}}, reject: true},
		{name: "silver ending as a booking starts", spec: silver, booked: []Booking{{s + 4*h, s + 5*h, 2}}},
		{name: "gold over a booking", spec: goldAt(t0.Add(21*time.Hour), 2*time.Hour), booked: []Booking{{s + 22*h, s + 23*h, 1}}, reject: true},
		{name: "gold beside a booking", spec: goldAt(t0.Add(21*time.Hour), 2*time.Hour), booked: []Booking{{s + 2*h, s + 3*h, 2}, {s + 23*h, s + 24*h, 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, o := baseSpec(), validOffer(id, t0)
			sellGold(o)
			if c.spec != nil {
				c.spec(spec)
			}
			o.Booked = c.booked
			if err := o.Validate(); err != nil {
				t.Fatalf("test offer invalid: %v", err)
			}
			ok, rej := Feasible(spec, []*Offer{o}, Env{Now: t0})
			if !c.reject {
				if len(ok) != 1 {
					t.Fatalf("rejected: %+v", rej)
				}
				return
			}
			want := Rejection{Provider: id, Check: CheckCalendar, Reason: ReasonBooked}
			if len(ok) != 0 || len(rej) != 1 || !reflect.DeepEqual(rej[0], want) {
				t.Fatalf("got ok=%d %+v, want %+v", len(ok), rej, want)
			}
		})
	}
}

func TestQueryFree(t *testing.T) {
	o := validOffer(fakeID(1), t0) // 2 GPUs, windows [t0, t0+8h) and [t0+20h, t0+30h)
	s := t0.Unix()
	h := func(n int64) int64 { return n * 3600 }
	match := func(q string) bool {
		t.Helper()
		pq, err := ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		return pq.Match(o, t0)
	}
	if !match("free>=4h") || !match("free=8h") {
		t.Fatal("an unbooked offer is free for its whole window")
	}
	o.Booked = []Booking{{s + 2*h(1), s + 6*h(1), 2}} // sold out from +2h to +6h
	if match("free>=4h") || !match("free=2h") {
		t.Fatal("free counts only to the booking")
	}
	o.Booked = []Booking{{s, s + 6*h(1), 2}} // sold out for the first 6h
	if match("free>=4h") || !match("free=2h") || !match("available>=8h") {
		t.Fatal("free is the window after the booking; available ignores bookings")
	}
	o.Booked = []Booking{{s, s + 8*h(1), 2}} // sold out to the window's end: the next night
	if !match("free>=10h") || match("free>10h") {
		t.Fatal("free is the next window's length")
	}
	o.Booked = []Booking{{s, s + 8*h(1), 1}} // one GPU left
	if !match("free>=8h") {
		t.Fatal("one free GPU is free")
	}
	o.Booked = []Booking{{s, s + 8*h(1), 2}, {s + 20*h(1), s + 30*h(1), 2}}
	if !match("free=0s") || match("free>0s") {
		t.Fatal("a sold-out offer has free 0")
	}
}

// BenchmarkNextFreeWindow: an offer at the limits, 256 windows and 256
// bookings, searched from its start for a window its bookings leave to
// the last one.
func BenchmarkNextFreeWindow(b *testing.B) {
	o := validOffer(fakeID(1), t0)
	o.GPUs = slices.Repeat(o.GPUs[:1], 8)
	s := t0.Unix()
	o.Windows, o.Booked = nil, nil
	for i := range int64(MaxWindows) {
		o.Windows = append(o.Windows, Window{s + i*1800, s + i*1800 + 1200})
	}
	for i := range int64(MaxBookings) {
		o.Booked = append(o.Booked, Booking{s + i*1800, s + i*1800 + 1500, 7 + int(i%2)})
	}
	if err := o.Validate(); err != nil {
		b.Fatal(err)
	}
	var w Window
	var ok bool
	b.ReportAllocs()
	for b.Loop() {
		w, ok = NextFreeWindow(o, 2, t0)
	}
	if ok {
		b.Fatalf("found %+v; every window is booked", w)
	}
	b.ReportMetric(float64(len(o.Windows)+len(o.Booked)), "edges/op")
}
