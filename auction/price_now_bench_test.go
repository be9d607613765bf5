package auction

import (
	"math/rand"
	"runtime"
	"testing"
	"time"
)

// pricedBook is 100,000 random offers as the node publishes them: every
// one with the default surge (0.5), a third with an evening peak, a
// fifth with bookings, so that price.TIER reads periods and surge.
func pricedBook(b *testing.B) (*Book, []*Offer, time.Time) {
	const n = 100_000
	r := rand.New(rand.NewSource(1))
	now := time.Unix(t0.Unix(), 0)
	book := NewBook(n, func() time.Time { return now })
	offers := make([]*Offer, n)
	for i := range offers {
		o := randomOffer(r, fakeID(uint64(i)), now.Unix())
		o.Pricing = &Pricing{SurgeBP: BP / 2}
		if r.Intn(3) == 0 {
			o.Pricing.TimeZone = "Europe/Berlin"
			o.Pricing.Periods = []PricePeriod{period("mon-fri 10:00-22:00", 15_000, Prices{})}
		}
		if r.Intn(5) == 0 {
			o.Booked = []Booking{{Start: now.Unix() - 60, End: now.Unix() + 3600, GPUs: 1}}
		}
		offers[i] = o
		if ok, err := book.Put(o, nil); !ok {
			b.Fatal(err)
		}
	}
	runtime.GC()
	return book, offers, now
}

// BenchmarkQueryPriceInEffect100k: price.silver (the price in effect,
// periods and surge read per offer) against floor.silver (the base
// floor, what price.silver was before), same book, same shape of query.
func BenchmarkQueryPriceInEffect100k(b *testing.B) {
	book, _, now := pricedBook(b)
	for _, c := range []struct{ name, query, order string }{
		{"floor", "floor.silver<=1.5 gpus>=1", "floor.silver"},
		{"in-effect-now", "price.silver<=1.5 gpus>=1", "price.silver"},
		{"in-effect-4h", "price.silver<=1.5 gpus>=1", "price.silver"},
	} {
		b.Run(c.name, func(b *testing.B) {
			q, err := ParseQuery(c.query)
			if err != nil {
				b.Fatal(err)
			}
			if c.name == "in-effect-4h" {
				q = q.At(now, 4*time.Hour)
			}
			for b.Loop() {
				if _, _, err := book.Query(q, c.order, 50); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQueryPriceInEffectRatio100k runs the floor.silver and the
// price.silver query in turns, so that a shared machine's load falls on
// both alike, and reports the second's time over the first's.
func BenchmarkQueryPriceInEffectRatio100k(b *testing.B) {
	book, _, _ := pricedBook(b)
	floorQ, err := ParseQuery("floor.silver<=1.5 gpus>=1")
	if err != nil {
		b.Fatal(err)
	}
	priceQ, err := ParseQuery("price.silver<=1.5 gpus>=1")
	if err != nil {
		b.Fatal(err)
	}
	var tf, tp time.Duration
	for b.Loop() {
		t := time.Now()
		if _, _, err := book.Query(floorQ, "floor.silver", 50); err != nil {
			b.Fatal(err)
		}
		tf += time.Since(t)
		t = time.Now()
		if _, _, err := book.Query(priceQ, "price.silver", 50); err != nil {
			b.Fatal(err)
		}
		tp += time.Since(t)
	}
	b.ReportMetric(float64(tf.Microseconds())/1000/float64(b.N), "floor-ms/op")
	b.ReportMetric(float64(tp.Microseconds())/1000/float64(b.N), "in-effect-ms/op")
	b.ReportMetric(float64(tp)/float64(tf), "x-floor")
}

// BenchmarkRelax100k: the suggestion job explain shows, over a book of
// 100,000 offers, for a spec few offers pass.
func BenchmarkRelax100k(b *testing.B) {
	_, offers, now := pricedBook(b)
	spec := benchSpec()
	spec.Placement.MaxRTT = 0
	spec.MaxPrice = 300_000
	env := Env{Now: now}
	var rx *Relaxation
	for b.Loop() {
		rx = Relax(spec, offers, env)
	}
	if rx != nil {
		b.Logf("%s admits %d", rx.Change, rx.Admits)
	}
}
