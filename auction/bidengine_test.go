package auction

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// thursdayPeak covers t0 (Thursday 12:00 UTC); mondayPeak does not.
var (
	thursdayPeak = &Calendar{TimeZone: "Europe/London", Weekly: []WeeklyWindow{{Days: []string{"thu"}, Start: "09:00", End: "18:00"}}}
	mondayPeak   = &Calendar{TimeZone: "Europe/London", Weekly: []WeeklyWindow{{Days: []string{"mon"}, Start: "09:00", End: "18:00"}}}
)

func TestQuote(t *testing.T) {
	o := validOffer(fakeID(1), t0) // bronze floor 1.2, silver 2.0, no gold
	for _, c := range []struct {
		name    string
		engine  BidEngine
		spec    func(*JobSpec)
		util    float64
		price   Credits
		decline string
	}{
		{name: "zero engine bids the floor", util: 0.9, price: 1_200_000},
		{name: "peak, half busy: floor", engine: BidEngine{Surge: 0.5, Peak: thursdayPeak}, util: 0.5, price: 1_200_000},
		// 1.2 * (1 + 0.5 * (0.75-0.5) * 2) = 1.5
		{name: "peak, three quarters busy", engine: BidEngine{Surge: 0.5, Peak: thursdayPeak}, util: 0.75, price: 1_500_000},
		{name: "off peak: floor", engine: BidEngine{Surge: 0.5, Peak: mondayPeak}, util: 0.9, price: 1_200_000},
		{name: "no peak calendar: floor", engine: BidEngine{Surge: 0.5}, util: 0.9, price: 1_200_000},
		{name: "surge capped at max_price", engine: BidEngine{Surge: 0.5, Peak: thursdayPeak}, util: 0.9,
			spec: func(s *JobSpec) { s.MaxPrice = 1_300_000 }, price: 1_300_000},
		{name: "negative surge never undercuts the floor", engine: BidEngine{Surge: -5, Peak: thursdayPeak}, util: 0.9, price: 1_200_000},
		{name: "huge surge is clamped", engine: BidEngine{Surge: 100, Peak: thursdayPeak}, util: 0.99,
			spec: func(s *JobSpec) { s.MaxPrice = 100_000_000 }, price: Credits(math.Ceil(1_200_000 * (1 + MaxSurge*0.98)))},
		{name: "busy: bronze declined", util: 1, decline: ReasonBusy},
		{name: "unknown load counts as busy", util: math.NaN(), decline: ReasonBusy},
		{name: "gold not sold here: declined for the tier, not the load", util: 1, spec: func(s *JobSpec) {
			s.Tier, s.Start, s.MaxPrice = Gold, t0.Add(20*time.Hour), 3_000_000
		}, decline: ReasonTierNotOffered},
		{name: "silver", util: 0.2, spec: func(s *JobSpec) { s.Tier, s.MaxPrice = Silver, 2_500_000 }, price: 2_000_000},
		{name: "floor above max", util: 0.2, spec: func(s *JobSpec) { s.MaxPrice = 1_000_000 }, decline: ReasonFloorAboveMax},
		{name: "policy", util: 0.2, spec: func(s *JobSpec) { s.Workload = "service" }, decline: ReasonWorkload},
		{name: "calendar", util: 0.2, spec: func(s *JobSpec) { s.Tier, s.MaxPrice, s.Duration.Max = Silver, 2_500_000, 9*time.Hour },
			decline: ReasonWindowTooShort},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := baseSpec()
			spec.MaxPrice = 2_000_000
			if c.spec != nil {
				c.spec(spec)
			}
			bid, d := c.engine.Quote(spec, o, c.util, t0)
			if c.decline != "" {
				if d == nil || d.Reason != c.decline || d.Provider != o.Provider {
					t.Fatalf("got bid %+v decline %+v, want decline %q", bid, d, c.decline)
				}
				return
			}
			if d != nil {
				t.Fatalf("declined: %s", d.Reason)
			}
			want := Bid{Provider: o.Provider, Tier: spec.Tier, Price: c.price, GPUs: 2, ValidUntil: t0.Add(DefaultBidValidity).Unix()}
			if bid.Provider != want.Provider || bid.Tier != want.Tier || bid.Price != want.Price || bid.GPUs != want.GPUs || bid.ValidUntil != want.ValidUntil {
				t.Fatalf("got %+v, want %+v", bid, want)
			}
		})
	}
}

// TestQuoteGoldWhenBusy: gold starts later, so current load does not stop
// a quote (the offer sells gold here).
func TestQuoteGoldWhenBusy(t *testing.T) {
	o := validOffer(fakeID(1), t0)
	o.Prices.Gold = 2_500_000
	spec := baseSpec()
	spec.Tier, spec.Start, spec.MaxPrice = Gold, t0.Add(20*time.Hour), 3_000_000
	if bid, d := (&BidEngine{Validity: time.Minute}).Quote(spec, o, 1, t0); d != nil || bid.Price != 2_500_000 || bid.ValidUntil != t0.Unix()+60 {
		t.Fatalf("got %+v %+v", bid, d)
	}
}

// TestPropertyQuotePrice: whatever the engine's settings and load, a bid
// is within [floor, max_price] and at most (1+MaxSurge) times the floor.
func TestPropertyQuotePrice(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	o := validOffer(fakeID(1), t0)
	for i := 0; i < 5000; i++ {
		o.Prices.Bronze = Credits(1 + r.Intn(5_000_000))
		spec := baseSpec()
		spec.MaxPrice = Credits(1 + r.Intn(10_000_000))
		e := BidEngine{Surge: r.Float64()*8 - 2, Peak: thursdayPeak}
		bid, d := e.Quote(spec, o, r.Float64()*1.2-0.1, t0)
		if d != nil {
			if d.Reason != ReasonFloorAboveMax && d.Reason != ReasonBusy || d.Reason == ReasonFloorAboveMax && o.Prices.Bronze <= spec.MaxPrice {
				t.Fatalf("declined %q with floor %d max %d", d.Reason, o.Prices.Bronze, spec.MaxPrice)
			}
			continue
		}
		if bid.Price < o.Prices.Bronze || bid.Price > spec.MaxPrice || float64(bid.Price) > float64(o.Prices.Bronze)*(1+MaxSurge)+1 {
			t.Fatalf("price %d, floor %d, max %d, surge %v", bid.Price, o.Prices.Bronze, spec.MaxPrice, e.Surge)
		}
	}
}

// TestQuoteWithPricing: an offer's Pricing sets the floor in force by the
// period at the job's start and surges only within the owner's cap; the
// engine's own Surge and Peak no longer apply.
func TestQuoteWithPricing(t *testing.T) {
	peak := []PricePeriod{{Weekly: WeeklyWindow{Days: []string{"thu"}, Start: "09:00", End: "18:00"}, MultBP: 15_000}} // t0 is Thursday 12:00 in London
	for _, c := range []struct {
		name    string
		pricing Pricing
		spec    func(*JobSpec)
		util    float64
		price   Credits
		decline string
	}{
		{name: "peak period: 1.5 x 1.2", pricing: Pricing{TimeZone: "Europe/London", Periods: peak}, util: 0.9, price: 1_800_000},
		{name: "no surge without the owner's", pricing: Pricing{}, util: 0.9, price: 1_200_000},
		// 1.8 * (1 + 1 * (0.9-0.5) * 2) = 3.24, capped at 1.2 x 1.8
		{name: "surge within the cap", pricing: Pricing{TimeZone: "Europe/London", Periods: peak, SurgeBP: 10_000, CapBP: 12_000}, util: 0.9,
			spec: func(s *JobSpec) { s.MaxPrice = 5_000_000 }, price: 2_160_000},
		{name: "cap above max_price: max_price", pricing: Pricing{SurgeBP: 10_000}, util: 0.99, price: 2_000_000},
		{name: "floor in force above max_price", pricing: Pricing{TimeZone: "Europe/London", Periods: peak},
			spec: func(s *JobSpec) { s.MaxPrice = 1_500_000 }, decline: ReasonFloorAboveMax},
		{name: "gold priced at its start, off peak", pricing: Pricing{TimeZone: "Europe/London", Periods: peak}, util: 1,
			spec: func(s *JobSpec) { s.Tier, s.Start, s.MaxPrice = Gold, t0.Add(20*time.Hour), 3_000_000 }, price: 2_500_000},
		{name: "gold reaching into the next peak pays it", pricing: Pricing{TimeZone: "Europe/London", Periods: []PricePeriod{
			{Weekly: WeeklyWindow{Days: []string{"fri"}, Start: "09:00", End: "10:00"}, Floors: Prices{Gold: 2_900_000}}}}, util: 0.2,
			spec: func(s *JobSpec) { s.Tier, s.Start, s.MaxPrice = Gold, t0.Add(20*time.Hour), 3_000_000 }, price: 2_900_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := validOffer(fakeID(1), t0) // bronze 1.2, silver 2.0
			o.Prices.Gold = 2_500_000
			o.Pricing = &c.pricing
			spec := baseSpec()
			spec.MaxPrice = 2_000_000
			if c.spec != nil {
				c.spec(spec)
			}
			bid, d := (&BidEngine{Surge: MaxSurge, Peak: thursdayPeak}).Quote(spec, o, c.util, t0)
			if c.decline != "" {
				if d == nil || d.Reason != c.decline {
					t.Fatalf("got bid %+v decline %+v, want decline %q", bid, d, c.decline)
				}
				return
			}
			if d != nil || bid.Price != c.price {
				t.Fatalf("got price %d decline %+v, want %d", bid.Price, d, c.price)
			}
		})
	}
}
