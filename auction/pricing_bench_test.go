package auction

import (
	"testing"
	"time"
)

// BenchmarkQuoteWithPeaks is a provider's quote for an offer priced by a
// realistic schedule: weekday and weekend periods, a per-tier floor and a
// capped surge, in a zone with daylight saving. The job's window reaches
// past the first period, so the calendar arithmetic runs.
func BenchmarkQuoteWithPeaks(b *testing.B) {
	o := validOffer(fakeID(1), t0)
	o.Pricing = &Pricing{TimeZone: "Europe/Berlin", SurgeBP: 5_000, CapBP: 13_000, Periods: []PricePeriod{
		{Weekly: WeeklyWindow{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "17:00", End: "22:00"}, MultBP: 15_000},
		{Weekly: WeeklyWindow{Days: []string{"sat", "sun"}, Start: "10:00", End: "18:00"}, MultBP: 12_000, Floors: Prices{Gold: 3_000_000}},
		{Weekly: WeeklyWindow{Days: []string{"fri"}, Start: "22:00", End: "02:00"}, MultBP: 20_000},
	}}
	spec := baseSpec()
	spec.MaxPrice = 5_000_000
	plain := *o
	plain.Pricing = nil
	for _, c := range []struct {
		name  string
		offer *Offer
	}{{"peaks", o}, {"floors only", &plain}} { // the second is the baseline
		b.Run(c.name, func(b *testing.B) {
			e := &BidEngine{}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, d := e.Quote(spec, c.offer, 0.8, t0); d != nil {
					b.Fatal(d.Reason)
				}
			}
		})
	}
}

// BenchmarkFloorFor is the price check's exact path alone, for a job of
// a day and a half.
func BenchmarkFloorFor(b *testing.B) {
	p := &Pricing{TimeZone: "America/New_York", Periods: []PricePeriod{
		{Weekly: WeeklyWindow{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "09:00", End: "18:00"}, MultBP: 15_000},
		{Weekly: WeeklyWindow{Days: []string{"sun"}, Start: "20:00", End: "23:00"}, MultBP: 30_000},
	}}
	base := Prices{Bronze: 1_000_000}
	for i := 0; i < b.N; i++ {
		_ = p.FloorFor(base, Bronze, t0, 36*time.Hour)
	}
}
