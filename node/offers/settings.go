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
	Policy   auction.Policy   `json:"policy"`
	Limits   attest.Limits    `json:"limits"`
	Paused   bool             `json:"paused"`
}

// DefaultSettings sell nothing until the owner sets a region and a
// price: guessing either would be a silent default with real consequences.
func DefaultSettings() Settings {
	return Settings{
		Calendar: auction.Calendar{TimeZone: "UTC"},
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
	return s, nil
}

func fieldErr(field string, err error) error { return fmt.Errorf("%s: %v", field, err) }

func parseRegion(s string) (auction.Region, error) {
	cont, country, ok := strings.Cut(strings.TrimSpace(s), "/")
	r := auction.Region{Continent: strings.ToLower(cont), Country: strings.ToUpper(country)}
	if !ok || len(r.Country) != 2 || r.Country[0] < 'A' || r.Country[0] > 'Z' || r.Country[1] < 'A' || r.Country[1] > 'Z' {
		return r, fmt.Errorf("%q: want continent/country, e.g. eu/DE or na/US", s)
	}
	for _, c := range auction.Continents {
		if c == r.Continent {
			return r, nil
		}
	}
	return r, fmt.Errorf("%q: continent must be one of %v", s, auction.Continents)
}

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
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a duration such as 90s, 5m or 12h", s)
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
