package auction

import (
	"math/rand"
	"testing"
	"time"
)

// peakOffer sells silver at 1 credit, doubled on Thursdays 10:00-18:00
// UTC: at t0 (Thursday 12:00) the peak is in force.
func peakOffer(id string) *Offer {
	o := validOffer(id, t0)
	o.Prices.Silver = 1_000_000
	o.Pricing = &Pricing{TimeZone: "UTC", Periods: []PricePeriod{period("thu 10:00-18:00", 2*BP, Prices{})}}
	return o
}

func TestPriceInEffectDuringPeak(t *testing.T) {
	o := peakOffer(fakeID(1))
	pe := o.PriceIn(Silver, t0, 0)
	if pe.Base != 1_000_000 || pe.Floor != 2_000_000 || pe.Price != 2_000_000 || pe.Peak == nil {
		t.Fatalf("in the peak: %+v, want base 1, floor and price 2, the peak named", pe)
	}
	if got, want := pe.Why(t0), "peak x2 until 18:00 UTC"; got != want {
		t.Errorf("why %q, want %q", got, want)
	}
	// A window that starts before the peak and runs into it pays it, and
	// says from when.
	early := t0.Add(-4 * time.Hour) // 08:00
	if pe := o.PriceIn(Silver, early, 3*time.Hour); pe.Floor != 2_000_000 || pe.Why(early) != "peak x2 from 10:00 UTC until 18:00 UTC" {
		t.Errorf("08:00 for 3h: %+v %q", pe, pe.Why(early))
	}
	// After it, the base.
	late := t0.Add(7 * time.Hour)
	if pe := o.PriceIn(Silver, late, time.Hour); pe.Floor != 1_000_000 || pe.Price != 1_000_000 || pe.Peak != nil || pe.Why(late) != "" {
		t.Errorf("19:00 for 1h: %+v", pe)
	}
}

func TestPriceInEffectSurgeFromBookings(t *testing.T) {
	o := validOffer(fakeID(1), t0)
	o.Prices.Silver = 1_000_000
	o.Pricing = &Pricing{SurgeBP: BP} // fully busy: x2
	o.GPUs = append(o.GPUs, o.GPUs[0], o.GPUs[0])
	o.Booked = []Booking{{Start: t0.Unix() - 60, End: t0.Unix() + 3600, GPUs: 3}}
	pe := o.PriceIn(Silver, t0, 0)
	// 3 of 4 booked: 1 + 1*(0.75-0.5)*2 = x1.5.
	if pe.Floor != 1_000_000 || pe.Price != 1_500_000 || pe.SurgeBP != 15_000 || pe.Booked != 3 || pe.GPUs != 4 {
		t.Fatalf("%+v, want floor 1, price 1.5 (x1.5, 3 of 4 booked)", pe)
	}
	if got, want := pe.Why(t0), "surge x1.5 (3 of 4 GPUs booked)"; got != want {
		t.Errorf("why %q, want %q", got, want)
	}
}

// The case: during a x2 peak, price.silver<=1.0 must not list an
// offer that refuses a max_price 1.0 job, and the refusal names the peak.
func TestPeakOfferShownFilteredAndRefusedAtItsPeakPrice(t *testing.T) {
	b := NewBook(100, newClock().now)
	peak, plain := peakOffer(fakeID(1)), validOffer(fakeID(2), t0)
	plain.Prices.Silver = 1_000_000
	mustPut(t, b, peak)
	mustPut(t, b, plain)
	query := func(s string, q func(*Query) *Query) []*Offer {
		t.Helper()
		p, err := ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		if q != nil {
			p = q(p)
		}
		got, _, err := b.Query(p, "price.silver", 0)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := query("price.silver<=1.0", nil); len(got) != 1 || got[0].Provider != plain.Provider {
		t.Errorf("price.silver<=1.0 in the peak: %d offers, want only the one without a peak", len(got))
	}
	if got := query("price.silver<=2.0", nil); len(got) != 2 || got[0].Provider != plain.Provider {
		t.Errorf("price.silver<=2.0 sorted by price: %d offers, want both, the peak one last", len(got))
	}
	if got := query("floor.silver<=1.0", nil); len(got) != 2 {
		t.Errorf("floor.silver<=1.0: %d offers, want both (the base floor)", len(got))
	}
	// Over a job window after the peak, the offer is at its base again.
	after := func(q *Query) *Query { return q.At(t0.Add(7*time.Hour), time.Hour) }
	if got := query("price.silver<=1.0", after); len(got) != 2 {
		t.Errorf("price.silver<=1.0 at 19:00 for 1h: %d offers, want both", len(got))
	}

	spec := baseSpec()
	spec.Tier, spec.MaxPrice, spec.Resources.GPUs = Silver, 1_000_000, 1
	ok, rej := Feasible(spec, []*Offer{peak, plain}, Env{Now: t0})
	if len(ok) != 1 || ok[0] != plain || len(rej) != 1 || rej[0].Reason != ReasonFloorAboveMax {
		t.Fatalf("feasible %d, rejected %+v; want the peak offer refused for its floor", len(ok), rej)
	}
	r := Diagnosed(spec, rej[0], peak, Env{Now: t0})
	if want := "silver floor 2/GPU-h in effect (peak x2 until 18:00 UTC; base 1), above max_price 1"; r.Detail != want {
		t.Errorf("refusal %q, want %q", r.Detail, want)
	}
}

// TestQueryPriceIsPriceIn: price.TIER, read from an offer's facts with
// compiled rules and a memo shared across offers, is Offer.PriceIn's
// Price for random schedules, bookings and windows.
func TestQueryPriceIsPriceIn(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	rules := []string{"mon-fri 09:00-18:00", "sat,sun 10:00-16:00", "thu 11:00-13:00", "mon-sun 22:00-06:00", "fri 00:00-24:00"}
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"}
	for round := range 20 {
		start := t0.Add(time.Duration(r.Intn(7*24)) * time.Hour)
		secs := int64(r.Intn(3)) * int64(r.Intn(30)) * 3600
		w := when{now: t0.Unix(), start: start.Unix(), secs: secs, memo: map[periodKey]bool{}}
		for i := range 200 {
			o := randomOffer(r, fakeID(uint64(i)), t0.Unix())
			o.Pricing = &Pricing{SurgeBP: int64(r.Intn(3)) * BP / 2, TimeZone: zones[r.Intn(len(zones))]}
			for range r.Intn(3) {
				o.Pricing.Periods = append(o.Pricing.Periods,
					period(rules[r.Intn(len(rules))], []int64{0, 12_000, 20_000}[r.Intn(3)], Prices{Silver: Credits(r.Intn(3)) * 900_000, Gold: 1}))
			}
			if r.Intn(2) == 0 {
				o.Booked = []Booking{{Start: start.Unix() - 60, End: start.Unix() + 3600, GPUs: 1 + r.Intn(len(o.GPUs))}}
			}
			f := factsOf(o)
			for tier, name := range []Tier{Gold, Silver, Bronze} {
				want := o.PriceIn(name, start, time.Duration(secs)*time.Second).Price
				if got := f.priceIn(tier, w); got != int64(want) {
					t.Fatalf("round %d offer %d %s: query price %d, PriceIn %d (%+v)", round, i, name, got, want, o.Pricing)
				}
			}
		}
	}
}

func TestPriceInEffectOwnPeakFloorNamesThePeriod(t *testing.T) {
	o := validOffer(fakeID(1), t0)
	o.Pricing = &Pricing{TimeZone: "UTC", Periods: []PricePeriod{period("thu 10:00-18:00", 0, Prices{Silver: 3_000_000})}}
	pe := o.PriceIn(Silver, t0, time.Hour)
	if want := "peak (thu 10:00-18:00 silver=3) until 18:00 UTC"; pe.Floor != 3_000_000 || pe.Why(t0) != want {
		t.Errorf("%+v %q, want floor 3 and %q", pe, pe.Why(t0), want)
	}
}
