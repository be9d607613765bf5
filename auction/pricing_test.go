package auction

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func period(rule string, multBP int64, floors Prices) PricePeriod {
	ws, err := ParseWeekly(rule)
	if err != nil || len(ws) != 1 {
		panic(rule)
	}
	return PricePeriod{Weekly: ws[0], MultBP: multBP, Floors: floors}
}

func berlin(t *testing.T, y int, m time.Month, d, h, min int) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return time.Date(y, m, d, h, min, 0, 0, loc)
}

// TestPricingFloorFor: the floor in force is the highest period rate over
// [start, start+dur), in the pricing's zone, with periods past midnight
// and across a daylight-saving change.
func TestPricingFloorFor(t *testing.T) {
	base := Prices{Gold: 1_500_000, Silver: 2_000_000, Bronze: 1_000_000}
	p := &Pricing{TimeZone: "Europe/Berlin", Periods: []PricePeriod{
		period("mon-fri 09:00-18:00", 15_000, Prices{}),           // 1.5x
		period("fri 22:00-02:00", 20_000, Prices{}),               // 2x, past midnight
		period("sat,sun 10:00-16:00", 0, Prices{Gold: 2_000_000}), // gold only
		period("sun 01:00-04:00", 30_000, Prices{}),               // across the spring-forward gap
	}}
	// 2026-03-29 (Sunday) Berlin springs forward 02:00 CET -> 03:00 CEST.
	for _, c := range []struct {
		name  string
		tier  Tier
		at    time.Time
		dur   time.Duration
		floor Credits
	}{
		{"weekday peak", Bronze, berlin(t, 2026, 3, 26, 13, 0), 0, 1_500_000},
		{"weekday evening: the floor", Bronze, berlin(t, 2026, 3, 26, 19, 0), time.Hour, 1_000_000},
		{"ends as the peak starts (half-open)", Bronze, berlin(t, 2026, 3, 26, 7, 0), 2 * time.Hour, 1_000_000},
		{"runs into the peak: its rate for all of it", Silver, berlin(t, 2026, 3, 26, 7, 0), 2*time.Hour + time.Minute, 3_000_000},
		{"past midnight, saturday 01:00", Bronze, berlin(t, 2026, 3, 28, 1, 0), 0, 2_000_000},
		{"past midnight, ended at 02:00", Bronze, berlin(t, 2026, 3, 28, 2, 0), time.Hour, 1_000_000},
		{"friday 21:59 for a minute", Bronze, berlin(t, 2026, 3, 27, 21, 59), time.Minute, 1_000_000},
		{"overlapping periods: the higher", Bronze, berlin(t, 2026, 3, 27, 17, 0), 6 * time.Hour, 2_000_000},
		{"weekend gold floor", Gold, berlin(t, 2026, 3, 28, 12, 0), 0, 2_000_000},
		{"weekend: other tiers at their floor", Silver, berlin(t, 2026, 3, 28, 12, 0), 0, 2_000_000},
		{"00:30 UTC on the DST day is 01:30 CET", Bronze, time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC), 0, 3_000_000},
		{"01:30 UTC is 03:30 CEST: still in", Bronze, time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC), 0, 3_000_000},
		{"02:00 UTC is 04:00 CEST: out", Bronze, time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC), time.Hour, 1_000_000},
		{"after DST, 07:30 UTC is 09:30 CEST: peak", Bronze, time.Date(2026, 3, 30, 7, 30, 0, 0, time.UTC), 0, 1_500_000},
		{"after DST, 16:30 UTC is 18:30 CEST: off", Bronze, time.Date(2026, 3, 30, 16, 30, 0, 0, time.UTC), 0, 1_000_000},
		{"a job longer than a week meets every period", Bronze, berlin(t, 2026, 3, 23, 19, 0), 30 * 24 * time.Hour, 3_000_000},
	} {
		if got := p.FloorFor(base, c.tier, c.at, c.dur); got != c.floor {
			t.Errorf("%s: floor %d, want %d", c.name, got, c.floor)
		}
	}
	if got := (*Pricing)(nil).FloorFor(base, Silver, t0, time.Hour); got != base.Silver {
		t.Errorf("nil pricing: %d, want the floor", got)
	}
	if got := p.FloorFor(Prices{Silver: 1}, Gold, berlin(t, 2026, 3, 28, 12, 0), 0); got != 0 {
		t.Errorf("a period offered a tier the offer does not sell: %d", got)
	}
	low := &Pricing{TimeZone: "UTC", Periods: []PricePeriod{period("daily 00:00-24:00", 0, Prices{Bronze: 1})}}
	if got := low.FloorFor(base, Bronze, t0, 0); got != base.Bronze {
		t.Errorf("a period floor below the offer's lowered it: %d", got)
	}
	odd := &Pricing{TimeZone: "UTC", Periods: []PricePeriod{period("daily 00:00-24:00", 10_001, Prices{})}}
	if got := odd.FloorFor(Prices{Bronze: 3}, Bronze, t0, 0); got != 4 {
		t.Errorf("3 x 1.0001 = %d, want 4 (rounded up, never below the floor)", got)
	}
}

// TestPricingSurge: surge starts at half utilisation and stops at the
// owner's cap, and at the hard bound when the owner set none.
func TestPricingSurge(t *testing.T) {
	for _, c := range []struct {
		p     *Pricing
		util  float64
		price Credits
	}{
		{nil, 1, 1_000_000},
		{&Pricing{}, 1, 1_000_000},
		{&Pricing{SurgeBP: 10_000}, 0.5, 1_000_000},
		{&Pricing{SurgeBP: 10_000}, 0.6, 1_200_000},
		{&Pricing{SurgeBP: 10_000}, 1, 2_000_000},
		{&Pricing{SurgeBP: 10_000, CapBP: 15_000}, 0.6, 1_200_000},
		{&Pricing{SurgeBP: 10_000, CapBP: 15_000}, 1, 1_500_000},
		{&Pricing{SurgeBP: 10_000, CapBP: 15_000}, -3, 1_000_000},
		{&Pricing{SurgeBP: 5_000}, 2, 1_500_000},
		{&Pricing{SurgeBP: 99_999}, 1, 4_000_000},                // clamped to MaxSurgeBP
		{&Pricing{SurgeBP: 99_999, CapBP: 99_999}, 1, 4_000_000}, // an out-of-range cap is the hard bound
	} {
		if got := c.p.Surge(1_000_000, c.util); got != c.price {
			t.Errorf("%+v at %v: %d, want %d", c.p, c.util, got, c.price)
		}
	}
	if got := (&Pricing{SurgeBP: 10_000}).Surge(1_000_000, nan()); got != 2_000_000 {
		t.Errorf("unknown load: %d, want the fully busy price", got)
	}
	if MaxSurgeBP != MaxSurge*BP {
		t.Errorf("MaxSurgeBP %d disagrees with MaxSurge %v", MaxSurgeBP, MaxSurge)
	}
	if m := (&Pricing{SurgeBP: 5_000, CapBP: 20_000}).MaxMultBP(); m != 15_000 {
		t.Errorf("MaxMultBP %d, want 15000 (full surge below the cap)", m)
	}
}

func nan() float64 { var z float64; return z / z }

func TestPricingValidate(t *testing.T) {
	ok := Pricing{TimeZone: "Europe/Berlin", Periods: []PricePeriod{period("mon-fri 09:00-18:00", 15_000, Prices{Gold: 2_000_000})}, SurgeBP: 5_000, CapBP: 20_000}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, mutate := range map[string]func(p *Pricing){
		"time_zone":                func(p *Pricing) { p.TimeZone = "" },
		"time_zone: unknown":       func(p *Pricing) { p.TimeZone = "Mars/Olympus" },
		"periods: 17":              func(p *Pricing) { p.Periods = make([]PricePeriod, MaxPricePeriods+1) },
		"periods[0].weekly":        func(p *Pricing) { p.Periods[0].Weekly.Start = "25:00" },
		"periods[0].weekly: days":  func(p *Pricing) { p.Periods[0].Weekly.Days = nil },
		"periods[0].mult_bp: 9999": func(p *Pricing) { p.Periods[0].MultBP = 9_999 },
		"periods[0].mult_bp: 1000": func(p *Pricing) { p.Periods[0].MultBP = MaxPeriodMultBP + 1 },
		"periods[0].floors.gold":   func(p *Pricing) { p.Periods[0].Floors.Gold = -1 },
		"periods[0].floors.bronze": func(p *Pricing) { p.Periods[0].Floors.Bronze = maxPrice + 1 },
		"periods[0]: neither":      func(p *Pricing) { p.Periods[0].MultBP, p.Periods[0].Floors = 0, Prices{} },
		"surge_bp":                 func(p *Pricing) { p.SurgeBP = MaxSurgeBP + 1 },
		"surge_bp: -1":             func(p *Pricing) { p.SurgeBP = -1 },
		"cap_bp":                   func(p *Pricing) { p.CapBP = BP - 1 },
		"cap_bp: 40001":            func(p *Pricing) { p.CapBP = BP + MaxSurgeBP + 1 },
	} {
		p := ok
		p.Periods = append([]PricePeriod(nil), ok.Periods...)
		mutate(&p)
		err := p.Validate()
		field, _, _ := strings.Cut(want, ":")
		if err == nil || !strings.HasPrefix(err.Error(), field) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	if err := (&Pricing{SurgeBP: 5_000}).Validate(); err != nil {
		t.Errorf("surge alone needs no zone: %v", err)
	}
	// In an offer, the error is ErrBadOffer and names pricing.
	_, id := testKey(t, 1)
	o := validOffer(id, t0)
	o.Pricing = &Pricing{SurgeBP: -1}
	if err := o.Validate(); !errors.Is(err, ErrBadOffer) || !strings.Contains(err.Error(), "pricing.surge_bp") {
		t.Errorf("offer with bad pricing: %v", err)
	}
}

func TestPricePeriodString(t *testing.T) {
	pp := period("mon-fri 09:00-18:00", 15_000, Prices{Gold: 2_000_000, Bronze: 450_000})
	if got, want := pp.String(), "mon,tue,wed,thu,fri 09:00-18:00 x1.5 gold=2 bronze=0.45"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := FormatBP(12_345); got != "1.2345" {
		t.Errorf("FormatBP(12345) = %q", got)
	}
}

// randomPricing is a valid, realistic-to-hostile schedule.
func randomPricing(r *rand.Rand) *Pricing {
	zones := []string{"Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "UTC"}
	p := &Pricing{TimeZone: zones[r.Intn(len(zones))], SurgeBP: int64(r.Intn(MaxSurgeBP + 1))}
	if r.Intn(2) == 0 {
		p.CapBP = BP + int64(r.Intn(MaxSurgeBP+1))
	}
	for i := r.Intn(5); i > 0; i-- {
		var days []string
		for _, d := range []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"} {
			if r.Intn(3) == 0 {
				days = append(days, d)
			}
		}
		if len(days) == 0 {
			days = []string{"sun"}
		}
		clock := func() string { return time.Date(0, 1, 1, r.Intn(24), 15*r.Intn(4), 0, 0, time.UTC).Format("15:04") }
		pp := PricePeriod{Weekly: WeeklyWindow{Days: days, Start: clock(), End: clock()}}
		if r.Intn(3) > 0 {
			pp.MultBP = BP + int64(r.Intn(MaxPeriodMultBP-BP+1))
		}
		if pp.MultBP == 0 || r.Intn(3) == 0 {
			pp.Floors.Bronze = Credits(1 + r.Intn(8_000_000))
		}
		if r.Intn(3) == 0 {
			pp.Floors.Gold = Credits(1 + r.Intn(8_000_000))
		}
		p.Periods = append(p.Periods, pp)
	}
	return p
}

// TestPropertyQuoteWithPricing: over random schedules, loads and jobs, a
// bid is never below the floor in force, above max_price, or above the
// floor in force times the cap; a decline on price happens exactly when
// the floor in force is above max_price; and the renter's price check
// agrees with that floor, fast paths included.
func TestPropertyQuoteWithPricing(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	o := validOffer(fakeID(1), t0)
	o.Windows = []Window{{o.IssuedAt, o.IssuedAt + 8*24*3600}}
	bids := 0
	for i := 0; i < 4000; i++ {
		o.Prices.Bronze = Credits(1 + r.Intn(3_000_000))
		o.Prices.Gold = Credits(1 + r.Intn(3_000_000))
		o.Pricing = randomPricing(r)
		if err := o.Pricing.Validate(); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(time.Duration(r.Intn(7*24*60)) * time.Minute)
		o.IssuedAt, o.ExpiresAt = now.Unix()-60, now.Unix()+3600
		o.Windows[0] = Window{o.IssuedAt, o.IssuedAt + 8*24*3600}
		spec := baseSpec()
		spec.MaxPrice = Credits(1 + r.Intn(10_000_000))
		spec.Duration.Max = time.Duration(1+r.Intn(12*60)) * time.Minute
		start := now
		if r.Intn(3) == 0 {
			start = now.Add(time.Duration(r.Intn(6*24*60)) * time.Minute)
			spec.Tier, spec.Start = Gold, start
		}
		floor := o.FloorFor(spec.Tier, start, spec.Duration.Max)
		if base := offerPrice(o, tierIndex(spec.Tier)); floor < base {
			t.Fatalf("floor in force %d below the offer's %d", floor, base)
		}
		m := newMatcher(spec, Env{Now: now})
		if rejected := m.price(o) != ""; rejected != (floor > spec.MaxPrice) {
			t.Fatalf("price check rejected=%t, floor in force %d, max %d", rejected, floor, spec.MaxPrice)
		}
		bid, d := (&BidEngine{Surge: 2, Peak: thursdayPeak}).Quote(spec, o, r.Float64()*1.2-0.1, now)
		if d != nil {
			if d.Reason == ReasonFloorAboveMax && floor <= spec.MaxPrice || d.Reason != ReasonFloorAboveMax && d.Reason != ReasonBusy {
				t.Fatalf("declined %q with floor in force %d max %d", d.Reason, floor, spec.MaxPrice)
			}
			continue
		}
		bids++
		capped := ceilDiv(floor*Credits(o.Pricing.MaxMultBP()), BP)
		if bid.Price < floor || bid.Price > spec.MaxPrice || bid.Price > capped {
			t.Fatalf("price %d: floor in force %d, max %d, cap %d (%+v)", bid.Price, floor, spec.MaxPrice, capped, o.Pricing)
		}
	}
	if bids < 1000 {
		t.Fatalf("only %d bids: the property was hardly exercised", bids)
	}
}

// TestWeekPrices: the week is drawn in the owner's zone, hour by hour,
// with availability beside the prices.
func TestWeekPrices(t *testing.T) {
	cal := &Calendar{TimeZone: "Europe/Berlin", Weekly: []WeeklyWindow{{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "08:00", End: "20:00"}}}
	p := &Pricing{TimeZone: "Europe/Berlin", SurgeBP: 5_000, Periods: []PricePeriod{period("mon-fri 09:00-18:00", 15_000, Prices{})}}
	w, err := WeekPrices(cal, Prices{Bronze: 1_000_000}, p, t0) // Thursday 13:00 in Berlin
	if err != nil {
		t.Fatal(err)
	}
	if w.TimeZone != "Europe/Berlin" || w.MaxMultBP != 15_000 || len(w.Days) != 7 {
		t.Fatalf("week %+v", w)
	}
	thu, sun, mon := w.Days[0], w.Days[3], w.Days[4]
	if thu.Date != "2026-03-26" || thu.Day != "thu" || sun.Day != "sun" || mon.Date != "2026-03-30" {
		t.Fatalf("days %s %s, %s, %s", thu.Date, thu.Day, sun.Day, mon.Date)
	}
	if _, ok := thu.Floors[Gold]; ok || len(thu.Floors[Bronze]) != 24 {
		t.Fatalf("floors for %v", thu.Floors)
	}
	for h, want := range map[int]Credits{8: 1_000_000, 9: 1_500_000, 17: 1_500_000, 18: 1_000_000} {
		if got := mon.Floors[Bronze][h]; got != want {
			t.Errorf("monday %02d:00 (after DST): %d, want %d", h, got, want)
		}
	}
	if !mon.Available[8] || mon.Available[7] || !mon.Available[19] || mon.Available[20] || sun.Available[12] {
		t.Errorf("availability: mon %v, sun %v", mon.Available, sun.Available)
	}
	if sun.Floors[Bronze][12] != 1_000_000 {
		t.Errorf("sunday noon: %d", sun.Floors[Bronze][12])
	}
}
