package auction

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// Pricing is the owner's price schedule, distinct from the availability
// calendar: price periods that raise the tier floors at certain hours of
// the week, in the owner's time zone, and a bounded demand response that
// raises a quote with utilisation up to a cap the owner sets. Prices are
// integer basis points of the floor (BP is 1x), never floats, so that every
// node computes the same floor in force.
//
// An offer without Pricing sells at its floors (Offer.Prices) at every hour,
// with no surge.
type Pricing struct {
	// TimeZone is the IANA zone the periods are in: the calendar's zone.
	// Required when there are periods.
	TimeZone string        `cbor:"1,keyasint,omitempty" json:"time_zone,omitempty"`
	Periods  []PricePeriod `cbor:"2,keyasint,omitempty" json:"periods,omitempty"`
	// SurgeBP is the surge strength in basis points: a quote is the floor
	// in force times 1 + SurgeBP/BP * max(0, util-0.5)*2, so nothing
	// changes up to half utilisation and a fully busy node asks
	// 1+SurgeBP/BP times the floor. 0..MaxSurgeBP; 0 = no surge.
	SurgeBP int64 `cbor:"3,keyasint,omitempty" json:"surge_bp,omitempty"`
	// CapBP caps the surged quote at CapBP/BP times the floor in force.
	// 0 means only the hard bound, BP+MaxSurgeBP; else BP..BP+MaxSurgeBP.
	CapBP int64 `cbor:"4,keyasint,omitempty" json:"cap_bp,omitempty"`
}

// PricePeriod raises the floors while its weekly rule holds. A tier with a
// floor of its own in Floors is sold at that floor, any other offered tier
// at its floor times MultBP/BP. A period never lowers a floor nor offers a
// tier the offer does not sell: the floor in force is at least
// Offer.Prices' floor, and 0 (not offered) stays 0.
type PricePeriod struct {
	Weekly WeeklyWindow `cbor:"1,keyasint" json:"weekly"`
	MultBP int64        `cbor:"2,keyasint,omitempty" json:"mult_bp,omitempty"` // 0 = 1x, else BP..MaxPeriodMultBP
	Floors Prices       `cbor:"3,keyasint,omitempty" json:"floors"`            // per-tier floors in Credits; 0 = use MultBP
}

// Pricing limits. Each bounds what a hostile offer could ask every renter
// to compute, or a typo could do to the owner's prices.
const (
	// BP is one basis point's reciprocal: a multiplier of BP is 1x.
	BP = 10_000
	// MaxPricePeriods bounds the periods of one offer.
	MaxPricePeriods = 16
	// MaxPeriodMultBP is the highest period multiplier, 10x.
	MaxPeriodMultBP = 10 * BP
	// MaxSurgeBP is MaxSurge in basis points: a fully busy node asks at
	// most 1+MaxSurge times the floor in force, whatever the owner set.
	MaxSurgeBP = 3 * BP
)

// Validate checks the zone, the periods and the surge bounds, naming the
// first bad field.
func (p *Pricing) Validate() error {
	if len(p.Periods) > MaxPricePeriods {
		return fmt.Errorf("periods: %d, limit %d", len(p.Periods), MaxPricePeriods)
	}
	if len(p.Periods) > 0 || p.TimeZone != "" {
		if _, err := loadZone(p.TimeZone); err != nil {
			return err
		}
	}
	for i, pp := range p.Periods {
		f := fmt.Sprintf("periods[%d]", i)
		if _, err := pp.Weekly.compile(); err != nil {
			return fmt.Errorf("%s.weekly: %v", f, err)
		}
		if pp.MultBP != 0 && (pp.MultBP < BP || pp.MultBP > MaxPeriodMultBP) {
			return fmt.Errorf("%s.mult_bp: %d, want 0 or %d..%d (1x..10x)", f, pp.MultBP, BP, MaxPeriodMultBP)
		}
		fl := pp.Floors
		for _, t := range []struct {
			name string
			c    Credits
		}{{"gold", fl.Gold}, {"silver", fl.Silver}, {"bronze", fl.Bronze}} {
			if t.c < 0 || t.c > maxPrice {
				return fmt.Errorf("%s.floors.%s: %d out of range [0, %d]", f, t.name, t.c, maxPrice)
			}
		}
		if pp.MultBP == 0 && fl == (Prices{}) {
			return fmt.Errorf("%s: neither a multiplier nor a floor: the period changes nothing", f)
		}
	}
	if p.SurgeBP < 0 || p.SurgeBP > MaxSurgeBP {
		return fmt.Errorf("surge_bp: %d, want 0..%d", p.SurgeBP, MaxSurgeBP)
	}
	if p.CapBP != 0 && (p.CapBP < BP || p.CapBP > BP+MaxSurgeBP) {
		return fmt.Errorf("cap_bp: %d, want 0 (no cap) or %d..%d", p.CapBP, BP, BP+MaxSurgeBP)
	}
	return nil
}

// IsZero reports whether p sets nothing: the same as no Pricing.
func (p *Pricing) IsZero() bool {
	return p == nil || p.TimeZone == "" && len(p.Periods) == 0 && p.SurgeBP == 0 && p.CapBP == 0
}

// FloorFor is the floor in force for a job of tier starting at start and
// running up to dur (duration.max): the offer's floor raised by the
// highest price period that overlaps [start, start+dur). The highest,
// because the provider commits its GPUs for the whole window and its
// dearest hour is what it gives up; a job that only touches a peak pays
// the peak rate for all of it. 0 when the tier is not offered.
//
// This is the one rule both sides apply: the renter's price check rejects
// an offer whose floor in force is above max_price, and BidEngine.Quote
// never bids below it, so a provider is neither filtered out nor accepted
// inconsistently.
func (o *Offer) FloorFor(tier Tier, start time.Time, dur time.Duration) Credits {
	return o.Pricing.FloorFor(o.Prices, tier, start, dur)
}

// FloorFor is Offer.FloorFor for floors base under p; a nil p is base's
// floor at every hour.
func (p *Pricing) FloorFor(base Prices, tier Tier, start time.Time, dur time.Duration) Credits {
	return p.floorFor(base, tierIndex(tier), start.Unix(), int64(dur/time.Second))
}

// floorFor is FloorFor in the matcher's units: a tier index and unix
// seconds.
func (p *Pricing) floorFor(base Prices, tier int, start, secs int64) Credits {
	floor := pricesAt(base, tier)
	if floor <= 0 || floor > maxPrice || p == nil || len(p.Periods) == 0 {
		return floor
	}
	if p.peakBound(base, tier) == floor {
		return floor // no period raises this tier
	}
	loc, err := loadZone(p.TimeZone)
	if err != nil {
		return floor // invalid (Validate rejects it): no period in force
	}
	// Any weekly rule recurs within 8 days, so a longer job meets every
	// period it could; bounding the span bounds the work.
	secs = min(max(secs, 1), 8*24*3600)
	from, to := time.Unix(start, 0).In(loc), time.Unix(start+secs, 0).In(loc)
	best := floor
	for i := range p.Periods {
		pp := &p.Periods[i]
		f := pp.floor(floor, tier)
		if f <= best {
			continue
		}
		r, err := pp.Weekly.compile()
		if err == nil && r.overlaps(from, to, loc) {
			best = f
		}
	}
	return best
}

// peakBound is the highest floor of tier under any period, whenever it
// holds: an upper bound on floorFor that costs no calendar arithmetic.
func (p *Pricing) peakBound(base Prices, tier int) Credits {
	floor := pricesAt(base, tier)
	if floor <= 0 || floor > maxPrice || p == nil {
		return floor
	}
	best := floor
	for i := range p.Periods {
		best = max(best, p.Periods[i].floor(floor, tier))
	}
	return best
}

// floor is the period's floor for tier whose offer floor is floor (> 0,
// at most maxPrice), rounded up to whole millionths so that a multiplier
// never rounds below the floor. Out-of-range values (Validate rejects
// them) are clamped so that nothing overflows.
func (pp *PricePeriod) floor(floor Credits, tier int) Credits {
	if own := pricesAt(pp.Floors, tier); own > 0 {
		return max(floor, min(own, maxPrice))
	}
	if pp.MultBP <= BP {
		return floor
	}
	return ceilDiv(floor*Credits(min(pp.MultBP, MaxPeriodMultBP)), BP)
}

// Surge is the quote for floor (the floor in force) at utilisation util
// (0..1; NaN counts as fully busy): floor times 1 + SurgeBP/BP *
// max(0, util-0.5)*2, capped at CapBP (or the hard bound), rounded up.
// A nil p never surges.
func (p *Pricing) Surge(floor Credits, util float64) Credits {
	if p == nil || p.SurgeBP <= 0 || floor <= 0 {
		return floor
	}
	if math.IsNaN(util) {
		util = 1 // unknown load: assume busy rather than under-price
	}
	utilBP := int64(math.Round(min(1, max(0, util)) * BP))
	mult := BP + min(p.SurgeBP, MaxSurgeBP)*max(0, utilBP-BP/2)*2/BP
	return ceilDiv(min(floor, maxPrice*MaxPeriodMultBP/BP)*Credits(min(mult, p.capBP())), BP)
}

// MaxMultBP is the most a quote may be above the floor in force, in basis
// points: the owner's cap, or what full utilisation gives when lower.
func (p *Pricing) MaxMultBP() int64 {
	if p == nil || p.SurgeBP <= 0 {
		return BP
	}
	return min(BP+min(p.SurgeBP, MaxSurgeBP), p.capBP())
}

func (p *Pricing) capBP() int64 {
	if p.CapBP < BP || p.CapBP > BP+MaxSurgeBP {
		return BP + MaxSurgeBP
	}
	return p.CapBP
}

// String writes a period as `gleaner offer set --peak` reads it, e.g.
// "mon-fri 09:00-18:00 x1.5 gold=2".
func (pp PricePeriod) String() string {
	var b strings.Builder
	b.WriteString(strings.Join(pp.Weekly.Days, ",") + " " + pp.Weekly.Start + "-" + pp.Weekly.End)
	if pp.MultBP != 0 {
		b.WriteString(" x" + FormatBP(pp.MultBP))
	}
	for _, t := range []struct {
		name string
		c    Credits
	}{{"gold", pp.Floors.Gold}, {"silver", pp.Floors.Silver}, {"bronze", pp.Floors.Bronze}} {
		if t.c > 0 {
			b.WriteString(" " + t.name + "=" + FormatCredits(t.c))
		}
	}
	return b.String()
}

// FormatBP writes basis points as the shortest exact decimal multiple of
// 1: 15000 -> "1.5".
func FormatBP(bp int64) string {
	return FormatCredits(Credits(bp * 100))
}

// pricesAt is p's price for the tier index, as offerPrice.
func pricesAt(p Prices, tier int) Credits {
	switch tier {
	case 0:
		return p.Gold
	case 1:
		return p.Silver
	case 2:
		return p.Bronze
	}
	return 0
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b Credits) Credits { return (a + b - 1) / b }

// overlaps reports whether any occurrence of r in loc meets [from, to).
func (r weeklyRule) overlaps(from, to time.Time, loc *time.Location) bool {
	met := false
	r.walk(from, to, 0, loc, func(s, e int64) bool {
		met = s < e && s < to.Unix() && e > from.Unix()
		return !met
	})
	return met
}

// walk calls f with each occurrence [s, e) of r in loc, in order, from
// the one starting the day before from (a window then may run past
// midnight into the range) to those starting extraDays after to's day,
// walking civil dates as Calendar.expandWeekly does, until f returns
// false.
func (r weeklyRule) walk(from, to time.Time, extraDays int, loc *time.Location, f func(s, e int64) bool) {
	day := time.Date(from.Year(), from.Month(), from.Day()-1, 0, 0, 0, 0, time.UTC)
	last := time.Date(to.Year(), to.Month(), to.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, extraDays)
	for ; !day.After(last); day = day.AddDate(0, 0, 1) {
		if r.days&(1<<uint(day.Weekday())) == 0 {
			continue
		}
		y, m, d := day.Date()
		endDay := d
		if r.end <= r.start {
			endDay++
		}
		s := time.Date(y, m, d, r.start/60, r.start%60, 0, 0, loc).Unix()
		e := time.Date(y, m, endDay, r.end/60, r.end%60, 0, 0, loc).Unix()
		if !f(s, e) {
			return
		}
	}
}

// zones caches loaded time zones: loading one parses the embedded
// database, far too slow to do per offer while matching a book. Only
// zones that exist are stored, so the cache is bounded by the database.
var zones sync.Map // string -> *time.Location

func loadZone(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	// As Calendar.location: "" and "Local" would differ between nodes.
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("time_zone: want an IANA zone such as Europe/Berlin, got %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time_zone: %v", err)
	}
	zones.Store(name, loc)
	return loc, nil
}
