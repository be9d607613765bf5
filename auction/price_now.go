package auction

import (
	"fmt"
	"strings"
	"time"
)

// PriceInEffect is what an offer asks for one tier over a job's window,
// and why: the owner's floor (Base), the floor in force once the price
// periods the window meets are applied (Floor, the number the renter's
// price check compares with max_price, see Offer.FloorFor), and the quote
// the surge would make of it at the load the offer's bookings show
// (Price). A renter never pays above Price from this offer (a quote is
// capped at max_price too), and an offer whose Floor is above max_price
// is never asked.
//
// The surge is the renter's estimate: the provider surges by the load it
// knows (bronze leases and withdrawn GPUs included), the renter by the
// silver and gold bookings the offer signs. Periods are exact.
type PriceInEffect struct {
	Tier  Tier    `json:"tier"`
	Base  Credits `json:"base" doc:"the owner's floor, micro-credits per GPU-hour"`
	Floor Credits `json:"floor" doc:"the floor in force over the window, micro-credits per GPU-hour: Base raised by the highest price period it meets; what max_price is compared with"`
	Price Credits `json:"price" doc:"Floor with the surge the offer's bookings imply, micro-credits per GPU-hour: the most a quote asks"`
	// Peak is the period that raised Base to Floor, as `offer set --peak`
	// writes it, with the stretch of it the window meets (unix seconds);
	// absent when no period raises the floor.
	Peak *PeakInEffect `json:"peak,omitempty"`
	// SurgeBP is Price/Floor in basis points when the surge raises it
	// (15000 = x1.5); Booked of GPUs are held by silver and gold leases
	// at the window's start.
	SurgeBP int64 `json:"surge_bp,omitempty"`
	Booked  int   `json:"booked,omitempty"`
	GPUs    int   `json:"gpus,omitempty"`
}

// PeakInEffect is the price period that sets a floor in force.
type PeakInEffect struct {
	Period   string `json:"period"` // "mon-fri 17:00-22:00 x2"
	MultBP   int64  `json:"mult_bp,omitempty"`
	From     int64  `json:"from"`  // this occurrence's start, unix seconds
	Until    int64  `json:"until"` // and end
	TimeZone string `json:"time_zone"`
}

// PriceIn is the offer's price in effect for tier over [start,
// start+dur): dur 0 means the instant start (what `market offers` shows
// as "now"). Zero PriceInEffect (Base 0) when the tier is not offered.
func (o *Offer) PriceIn(tier Tier, start time.Time, dur time.Duration) PriceInEffect {
	t := tierIndex(tier)
	base := pricesAt(o.Prices, t)
	pe := PriceInEffect{Tier: tier, Base: base, Floor: base, Price: base, GPUs: len(o.GPUs)}
	if base <= 0 {
		return PriceInEffect{Tier: tier}
	}
	from, secs := start.Unix(), int64(dur/time.Second)
	pe.Floor = o.Pricing.floorFor(o.Prices, t, from, secs)
	if pe.Floor > base {
		pe.Peak = o.Pricing.peakIn(o.Prices, t, pe.Floor, from, secs)
	}
	pe.Price, pe.Booked = surgeAt(o.Pricing, pe.Floor, o.Booked, len(o.GPUs), from)
	if pe.Price > pe.Floor {
		pe.SurgeBP = int64(ceilDiv(pe.Price*BP, pe.Floor))
	}
	return pe
}

// surgeAt is floor surged by the load the bookings show at instant at,
// and how many GPUs they hold then.
func surgeAt(p *Pricing, floor Credits, booked []Booking, gpus int, at int64) (Credits, int) {
	if p == nil || p.SurgeBP <= 0 || gpus <= 0 || len(booked) == 0 {
		return floor, 0 // nothing booked: idle, and the surge starts at half busy
	}
	held := min(bookedPeak(booked, at, at+1), gpus)
	return p.Surge(floor, float64(held)/float64(gpus)), held
}

// peakIn finds the period whose floor is want over the window and the
// occurrence of it that the window meets: what floorFor chose.
func (p *Pricing) peakIn(base Prices, tier int, want Credits, start, secs int64) *PeakInEffect {
	loc, err := loadZone(p.TimeZone)
	if err != nil {
		return nil
	}
	secs = min(max(secs, 1), 8*24*3600)
	from, to := time.Unix(start, 0).In(loc), time.Unix(start+secs, 0).In(loc)
	floor := pricesAt(base, tier)
	for i := range p.Periods {
		pp := &p.Periods[i]
		if pp.floor(floor, tier) != want {
			continue
		}
		r, err := pp.Weekly.compile()
		if err != nil {
			continue
		}
		if s, e, ok := r.occurrence(from, to, loc); ok {
			return &PeakInEffect{Period: pp.String(), MultBP: pp.MultBP, From: s, Until: e, TimeZone: p.TimeZone}
		}
	}
	return nil
}

// occurrence is the first occurrence of r in loc that meets [from, to),
// as overlaps finds it, with touching occurrences joined (mon-fri
// 00:00-24:00 is one stretch, not five).
func (r weeklyRule) occurrence(from, to time.Time, loc *time.Location) (s, e int64, ok bool) {
	f, t := from.Unix(), to.Unix()
	done := false
	r.walk(from, to, 8, loc, func(os, oe int64) bool {
		switch {
		case !ok && os < oe && os < t && oe > f:
			s, e, ok = os, oe, true
		case ok && os <= e && oe > e:
			e = oe // the next occurrence continues this one
		case ok:
			done = true
		}
		return !done
	})
	return s, e, ok
}

// Why says in words what raised Price above Base, relative to now: "peak
// x2 until 18:00 UTC", "surge x1.25 (3 of 4 GPUs booked)", both joined by
// "; ", or "" when nothing did.
func (pe PriceInEffect) Why(now time.Time) string {
	var parts []string
	if pk := pe.Peak; pk != nil {
		what := "peak"
		if pk.MultBP > 0 && pe.Floor == ceilDiv(pe.Base*Credits(pk.MultBP), BP) {
			what += " x" + FormatBP(pk.MultBP)
		} else { // the period's own floor for this tier
			what += " (" + pk.Period + ")"
		}
		loc, _ := loadZone(pk.TimeZone)
		if loc == nil {
			loc = time.UTC
		}
		if pk.From > now.Unix() {
			what += " from " + clockAt(time.Unix(pk.From, 0).In(loc), now)
		}
		parts = append(parts, what+" until "+clockAt(time.Unix(pk.Until, 0).In(loc), now))
	}
	if pe.SurgeBP > 0 {
		parts = append(parts, fmt.Sprintf("surge x%s (%d of %d GPUs booked)", FormatBP(pe.SurgeBP), pe.Booked, pe.GPUs))
	}
	return strings.Join(parts, "; ")
}

// clockAt writes t as "18:00 CET" within a day of now, else with its
// weekday and date.
func clockAt(t, now time.Time) string {
	if d := t.Sub(now); d < 20*time.Hour && d > -20*time.Hour {
		return t.Format("15:04 MST")
	}
	return t.Format("Mon 2 Jan 15:04 MST")
}

// PriceRefusal says why an offer's floor in force refuses a job of
// maxPrice: "silver floor 2/GPU-h in effect (peak x2 until 18:00 UTC),
// above max_price 1". "" when it does not.
func (o *Offer) PriceRefusal(spec *JobSpec, now time.Time) string {
	start := now
	if spec.Tier == Gold {
		start = spec.Start
	}
	pe := o.PriceIn(spec.Tier, start, spec.Duration.Max)
	if pe.Base <= 0 || pe.Floor <= spec.MaxPrice {
		return ""
	}
	if pe.Floor == pe.Base {
		return fmt.Sprintf("%s floor %s/GPU-h, above max_price %s", spec.Tier, FormatCredits(pe.Floor), FormatCredits(spec.MaxPrice))
	}
	pe.SurgeBP = 0 // the floor, not the quote, refuses
	return fmt.Sprintf("%s floor %s/GPU-h in effect (%s; base %s), above max_price %s",
		spec.Tier, FormatCredits(pe.Floor), pe.Why(now), FormatCredits(pe.Base), FormatCredits(spec.MaxPrice))
}
