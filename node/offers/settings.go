package offers

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
)

// Settings are the owner's choices about what to sell: prices,
// calendar, policy, limits and region. They persist in the node's store and
// change at once, without a restart, through offer_set.
type Settings struct {
	Region   auction.Region   `json:"region"`
	Prices   auction.Prices   `json:"prices"`
	Calendar auction.Calendar `json:"calendar"`
	// Pricing's periods are in the calendar's zone: Apply keeps its
	// TimeZone equal to Calendar.TimeZone whenever it has periods.
	Pricing auction.Pricing `json:"pricing"`
	Policy  auction.Policy  `json:"policy"`
	Limits  attest.Limits   `json:"limits"`
	Paused  bool            `json:"paused"`
}

// DefaultSettings sell nothing until the owner sets a region and a
// price: guessing either would be a silent default with real consequences.
// The surge is what every provider asked before owners could set it: up
// to half again the floor when fully busy (settings saved before then
// decode onto these defaults, so they keep it).
func DefaultSettings() Settings {
	return Settings{
		Calendar: auction.Calendar{TimeZone: "UTC"},
		Pricing:  auction.Pricing{SurgeBP: DefaultSurgeBP},
		Policy:   auction.Policy{Workloads: []string{"batch"}, PreemptNotice: 60},
	}
}

// Ready says whether the settings are complete enough to offer, and if not,
// what the owner must still set.
func (s Settings) Ready() error {
	var missing []string
	if s.Region.Continent == "" || s.Region.Country == "" {
		missing = append(missing, "a region (--region eu/DE)")
	}
	if s.Prices.Gold == 0 && s.Prices.Silver == 0 && s.Prices.Bronze == 0 {
		missing = append(missing, "a price for at least one tier (--price.bronze 0.45)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("not offered yet: set %s with `gleaner offer set`", strings.Join(missing, " and "))
	}
	return nil
}

// DefaultSurgeBP is the surge of DefaultSettings, 0.5.
const DefaultSurgeBP = auction.BP / 2

// OfferPricing is the pricing to publish: nil when the owner's sets
// nothing, so that the offer has one wire form.
func (s Settings) OfferPricing() *auction.Pricing {
	if s.Pricing.IsZero() {
		return nil
	}
	p := s.Pricing
	p.Periods = append([]auction.PricePeriod(nil), p.Periods...)
	return &p
}

// Patch is offer_set's parameter: every field is optional and only
// the fields present change.
type Patch struct {
	Region        *string   `json:"region,omitempty" doc:"continent/country, e.g. eu/DE"`
	PriceGold     *string   `json:"price_gold,omitempty" doc:"credits per GPU-hour; 0 stops offering the tier"`
	PriceSilver   *string   `json:"price_silver,omitempty"`
	PriceBronze   *string   `json:"price_bronze,omitempty"`
	TimeZone      *string   `json:"time_zone,omitempty" doc:"IANA zone of the calendar, e.g. Europe/Berlin"`
	Weekly        *string   `json:"weekly,omitempty" doc:"e.g. 'mon-fri 19:00-08:00; sat,sun 00:00-24:00'; empty = always"`
	OneOff        *[]string `json:"one_off,omitempty" doc:"extra windows START/END in RFC 3339"`
	Blackouts     *[]string `json:"blackouts,omitempty" doc:"unavailable windows START/END in RFC 3339"`
	Workloads     *[]string `json:"workloads,omitempty" doc:"batch, service"`
	Images        *[]string `json:"images,omitempty" doc:"image allowlist patterns; empty = any"`
	MaxDuration   *string   `json:"max_duration,omitempty" doc:"longest job, e.g. 12h; 0 = no limit"`
	PreemptNotice *string   `json:"preempt_notice,omitempty" doc:"notice before a bronze job is stopped, e.g. 2m"`
	Egress        *bool     `json:"egress,omitempty" doc:"let job containers reach the network"`
	MaxTempC      *int      `json:"max_temperature_c,omitempty" doc:"withdraw a GPU above this temperature; 0 = no limit"`
	MaxPowerW     *float64  `json:"max_power_w,omitempty" doc:"withdraw a GPU above this power draw; 0 = no limit"`
	StopTempC     *int      `json:"stop_temperature_c,omitempty" doc:"hard limit: stop every job on a GPU above this temperature, silver and gold too, with its notice; 0 = none"`
	StopPowerW    *float64  `json:"stop_power_w,omitempty" doc:"hard limit: stop every job on a GPU above this power draw, with its notice; 0 = none"`
	Peak          *string   `json:"peak,omitempty" doc:"price periods in the calendar's zone, ';'-separated: 'DAYS HH:MM-HH:MM' then a multiplier of the floors (x1.5) and/or tier floors (gold=2.0), e.g. 'mon-fri 09:00-18:00 x1.5; sat,sun 10:00-16:00 gold=2'; empty = none"`
	PeakGold      *string   `json:"peak_gold,omitempty" doc:"gold floor in every price period, credits per GPU-hour; 0 = the period's multiplier"`
	PeakSilver    *string   `json:"peak_silver,omitempty"`
	PeakBronze    *string   `json:"peak_bronze,omitempty"`
	Surge         *string   `json:"surge,omitempty" doc:"surge with utilisation: fully busy asks 1+surge times the floor in force, e.g. 0.5; 0 = none; at most 3"`
	SurgeCap      *string   `json:"surge_cap,omitempty" doc:"most a surge may ask, as a multiple of the floor in force, e.g. 2x; 0 = the hard bound 4x"`
}

// Apply returns s changed by p, or an error naming the first bad field.
func (p Patch) Apply(s Settings) (Settings, error) {
	var err error
	if p.Region != nil {
		if s.Region, err = parseRegion(*p.Region); err != nil {
			return s, fieldErr("region", err)
		}
	}
	for _, pr := range []struct {
		name string
		in   *string
		out  *auction.Credits
	}{{"price_gold", p.PriceGold, &s.Prices.Gold}, {"price_silver", p.PriceSilver, &s.Prices.Silver}, {"price_bronze", p.PriceBronze, &s.Prices.Bronze}} {
		if pr.in != nil {
			if *pr.out, err = ParseCredits(*pr.in); err != nil {
				return s, fieldErr(pr.name, err)
			}
		}
	}
	if p.TimeZone != nil {
		if _, err := time.LoadLocation(*p.TimeZone); err != nil || *p.TimeZone == "" || *p.TimeZone == "Local" {
			return s, fieldErr("time_zone", fmt.Errorf("%q is not an IANA time zone such as Europe/Berlin or America/New_York", *p.TimeZone))
		}
		s.Calendar.TimeZone = *p.TimeZone
	}
	if p.Weekly != nil {
		s.Calendar.Weekly = nil
		if strings.TrimSpace(*p.Weekly) != "" {
			if s.Calendar.Weekly, err = auction.ParseWeekly(*p.Weekly); err != nil {
				return s, fieldErr("weekly", err)
			}
		}
	}
	if p.OneOff != nil {
		if s.Calendar.OneOff, err = parseWindows(*p.OneOff); err != nil {
			return s, fieldErr("one_off", err)
		}
	}
	if p.Blackouts != nil {
		if s.Calendar.Blackouts, err = parseWindows(*p.Blackouts); err != nil {
			return s, fieldErr("blackouts", err)
		}
	}
	if err := s.Calendar.Validate(); err != nil {
		return s, fieldErr("calendar", err)
	}
	if p.Workloads != nil {
		for _, w := range *p.Workloads {
			if w != "batch" && w != "service" {
				return s, fieldErr("workloads", fmt.Errorf("%q: use batch and/or service", w))
			}
		}
		if len(*p.Workloads) == 0 {
			return s, fieldErr("workloads", errors.New("allow at least one of batch, service"))
		}
		s.Policy.Workloads = *p.Workloads
	}
	if p.Images != nil {
		s.Policy.Images = *p.Images
	}
	if p.MaxDuration != nil {
		if s.Policy.MaxDurationSec, err = parseSeconds(*p.MaxDuration); err != nil {
			return s, fieldErr("max_duration", err)
		}
	}
	if p.PreemptNotice != nil {
		if s.Policy.PreemptNotice, err = parseSeconds(*p.PreemptNotice); err != nil {
			return s, fieldErr("preempt_notice", err)
		}
		if s.Policy.PreemptNotice > auction.MaxNoticeSec {
			return s, fieldErr("preempt_notice", fmt.Errorf("%q: at most %s", *p.PreemptNotice, time.Duration(auction.MaxNoticeSec)*time.Second))
		}
	}
	if p.Egress != nil {
		s.Policy.Egress = *p.Egress
	}
	if p.MaxTempC != nil {
		if *p.MaxTempC < 0 || *p.MaxTempC > 120 {
			return s, fieldErr("max_temperature_c", fmt.Errorf("%d: use 0 (no limit) to 120", *p.MaxTempC))
		}
		s.Limits.MaxTempC = *p.MaxTempC
	}
	if p.MaxPowerW != nil {
		if *p.MaxPowerW < 0 || *p.MaxPowerW > 2000 {
			return s, fieldErr("max_power_w", fmt.Errorf("%g: use 0 (no limit) to 2000", *p.MaxPowerW))
		}
		s.Limits.MaxPowerW = *p.MaxPowerW
	}
	if p.StopTempC != nil {
		if *p.StopTempC < 0 || *p.StopTempC > 120 {
			return s, fieldErr("stop_temperature_c", fmt.Errorf("%d: use 0 (none) to 120", *p.StopTempC))
		}
		s.Limits.StopTempC = *p.StopTempC
	}
	if p.StopPowerW != nil {
		if *p.StopPowerW < 0 || *p.StopPowerW > 2000 {
			return s, fieldErr("stop_power_w", fmt.Errorf("%g: use 0 (none) to 2000", *p.StopPowerW))
		}
		s.Limits.StopPowerW = *p.StopPowerW
	}
	// A hard limit below the soft one would stop silver and gold jobs
	// before the GPU even left the offer.
	if l := s.Limits; l.StopTempC > 0 && l.MaxTempC > 0 && l.StopTempC < l.MaxTempC {
		return s, fieldErr("stop_temperature_c", fmt.Errorf("%d°C is below the withdrawal limit %d°C: the hard limit must be at or above it", l.StopTempC, l.MaxTempC))
	}
	if l := s.Limits; l.StopPowerW > 0 && l.MaxPowerW > 0 && l.StopPowerW < l.MaxPowerW {
		return s, fieldErr("stop_power_w", fmt.Errorf("%g W is below the withdrawal limit %g W: the hard limit must be at or above it", l.StopPowerW, l.MaxPowerW))
	}
	return p.applyPricing(s)
}

// applyPricing applies the pricing fields, then checks the schedule as
// a whole in the calendar's zone (which may just have changed).
func (p Patch) applyPricing(s Settings) (Settings, error) {
	var err error
	if p.Peak != nil {
		if s.Pricing.Periods, err = ParsePeaks(*p.Peak); err != nil {
			return s, fieldErr("peak", err)
		}
	}
	for _, pf := range []struct {
		name string
		in   *string
		out  func(*auction.Prices) *auction.Credits
	}{
		{"peak_gold", p.PeakGold, func(x *auction.Prices) *auction.Credits { return &x.Gold }},
		{"peak_silver", p.PeakSilver, func(x *auction.Prices) *auction.Credits { return &x.Silver }},
		{"peak_bronze", p.PeakBronze, func(x *auction.Prices) *auction.Credits { return &x.Bronze }},
	} {
		if pf.in == nil {
			continue
		}
		c, err := ParseCredits(*pf.in)
		if err != nil {
			return s, fieldErr(pf.name, err)
		}
		if len(s.Pricing.Periods) == 0 {
			return s, fieldErr(pf.name, errors.New("no price periods to set it in: add them with --peak"))
		}
		periods := append([]auction.PricePeriod(nil), s.Pricing.Periods...)
		for i := range periods {
			*pf.out(&periods[i].Floors) = c
			if periods[i].MultBP == 0 && periods[i].Floors == (auction.Prices{}) {
				return s, fieldErr(pf.name, fmt.Errorf("0 leaves peak %d %q raising nothing: give it a multiplier", i+1, periods[i].String()))
			}
		}
		s.Pricing.Periods = periods
	}
	if p.Surge != nil {
		bp, err := parseMultiple(*p.Surge, "surge", 0, auction.MaxSurgeBP)
		if err != nil {
			return s, fieldErr("surge", err)
		}
		s.Pricing.SurgeBP = bp
	}
	if p.SurgeCap != nil {
		bp, err := parseMultiple(*p.SurgeCap, "surge cap", 0, auction.BP+auction.MaxSurgeBP)
		if err == nil && bp != 0 && bp < auction.BP {
			err = fmt.Errorf("surge cap %s: a cap below 1x would undercut the floor; want 0 (none) or 1..%s", *p.SurgeCap, auction.FormatBP(auction.BP+auction.MaxSurgeBP))
		}
		if err != nil {
			return s, fieldErr("surge_cap", err)
		}
		s.Pricing.CapBP = bp
	}
	s.Pricing.TimeZone = ""
	if len(s.Pricing.Periods) > 0 {
		s.Pricing.TimeZone = s.Calendar.TimeZone
	}
	if err := s.Pricing.Validate(); err != nil {
		return s, fieldErr("pricing", err)
	}
	return s, nil
}

// ParsePeaks parses price periods: rules separated by ";", each "DAYS
// HH:MM-HH:MM" as in --weekly, then at least one of a multiplier of the
// floors ("x1.5" or "1.5x") and tier floors in credits ("gold=2.0",
// several separated by spaces or commas). A tier with its own floor is
// sold at it in the period, the others at their floor times the
// multiplier. "" is no periods. Errors name the rule (1-based).
func ParsePeaks(s string) ([]auction.PricePeriod, error) {
	var out []auction.PricePeriod
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		pp, err := parsePeak(part)
		if err != nil {
			return nil, fmt.Errorf("peak %d %q: %v", i+1, part, err)
		}
		out = append(out, pp)
	}
	if len(out) > auction.MaxPricePeriods {
		return nil, fmt.Errorf("%d price periods, limit %d", len(out), auction.MaxPricePeriods)
	}
	return out, nil
}

func parsePeak(part string) (auction.PricePeriod, error) {
	var pp auction.PricePeriod
	fields := strings.Fields(part)
	if len(fields) < 3 {
		return pp, errors.New(`want "DAYS HH:MM-HH:MM" and a price: x1.5 and/or gold=2.0`)
	}
	ws, err := auction.ParseWeekly(fields[0] + " " + fields[1])
	if err != nil {
		return pp, err
	}
	pp.Weekly = ws[0]
	for _, f := range fields[2:] {
		for _, item := range strings.Split(f, ",") {
			if item == "" {
				continue
			}
			if tier, amount, ok := strings.Cut(item, "="); ok {
				c, err := ParseCredits(amount)
				if err != nil {
					return pp, fmt.Errorf("%s: %v", tier, err)
				}
				switch strings.ToLower(tier) {
				case "gold":
					pp.Floors.Gold = c
				case "silver":
					pp.Floors.Silver = c
				case "bronze":
					pp.Floors.Bronze = c
				default:
					return pp, fmt.Errorf("%q: tier must be gold, silver or bronze", tier)
				}
				continue
			}
			m := strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(item), "x"), "x")
			if pp.MultBP, err = parseMultiple(m, "multiplier", auction.BP, auction.MaxPeriodMultBP); err != nil {
				return pp, err
			}
		}
	}
	if pp.MultBP == 0 && pp.Floors == (auction.Prices{}) {
		return pp, errors.New("raises no price: give a multiplier above 0 (x1.5) or a tier floor (gold=2.0)")
	}
	return pp, nil
}

// parseMultiple parses a decimal such as "1.5" (or "2x") exactly into
// basis points within [lo, hi].
func parseMultiple(s, what string, lo, hi int64) (int64, error) {
	s = strings.TrimSuffix(strings.TrimSpace(strings.ToLower(s)), "x")
	c, err := ParseCredits(s)
	if err != nil || c%100 != 0 {
		return 0, fmt.Errorf("%s %q: want a decimal with at most 4 places, %s..%s", what, s, auction.FormatBP(lo), auction.FormatBP(hi))
	}
	bp := int64(c / 100)
	if bp < lo || bp > hi {
		return 0, fmt.Errorf("%s %s: want %s..%s", what, s, auction.FormatBP(lo), auction.FormatBP(hi))
	}
	return bp, nil
}

func fieldErr(field string, err error) error { return fmt.Errorf("%s: %v", field, err) }

// parseRegion is auction.ParseRegion: one check of what a region is, with
// its suggestions (na/DE: did you mean eu/DE?).
func parseRegion(s string) (auction.Region, error) { return auction.ParseRegion(s) }

// ParseCredits parses a decimal amount of credits ("0.45") exactly into
// millionths; more than six decimals or a negative amount is an error.
// auction.FormatCredits is its inverse.
func ParseCredits(s string) (auction.Credits, error) {
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q: want a non-negative amount such as 0.45", s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%q: at most 6 decimals", s)
	}
	w, err := strconv.ParseInt("0"+whole, 10, 64)
	if err != nil || w > math.MaxInt64/1_000_000-1 {
		return 0, fmt.Errorf("%q: want a non-negative amount such as 0.45", s)
	}
	f := int64(0)
	if frac != "" {
		f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: want a non-negative amount such as 0.45", s)
		}
	}
	return auction.Credits(w*1_000_000 + f), nil
}

func parseSeconds(s string) (int64, error) {
	if s == "0" {
		return 0, nil
	}
	// The one duration syntax of specs and queries, so 2d works here too.
	d, err := auction.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as 90s, 5m, 12h or 2d", s)
	}
	return int64(d / time.Second), nil
}

func parseWindows(specs []string) ([]auction.Window, error) {
	out := make([]auction.Window, 0, len(specs))
	for _, sp := range specs {
		a, b, ok := strings.Cut(sp, "/")
		start, err1 := time.Parse(time.RFC3339, strings.TrimSpace(a))
		end, err2 := time.Parse(time.RFC3339, strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || !end.After(start) {
			return nil, fmt.Errorf("%q: want START/END in RFC 3339, e.g. 2026-12-24T00:00:00+01:00/2026-12-27T00:00:00+01:00", sp)
		}
		out = append(out, auction.Window{Start: start.Unix(), End: end.Unix()})
	}
	return out, nil
}
