package auction

import (
	"sort"
	"time"
)

// PriceWeek is a week of floors in force, hour by hour in the owner's
// zone, for the owner to see what their schedule asks (gleaner offer
// show). Hours are wall-clock hours 00..23: on a daylight-saving day the
// hour that does not exist shows the next one, and the hour that occurs
// twice shows once.
type PriceWeek struct {
	TimeZone string `json:"time_zone"`
	// MaxMultBP: surge multiplies a floor by at most MaxMultBP/BP when
	// fully busy (BP = no surge).
	MaxMultBP int64      `json:"max_mult_bp"`
	Days      []PriceDay `json:"days"`
}

// PriceDay is one local day of a PriceWeek.
type PriceDay struct {
	Date      string             `json:"date"`      // YYYY-MM-DD in the zone
	Day       string             `json:"day"`       // mon..sun
	Available []bool             `json:"available"` // per hour: the calendar has availability in it
	Floors    map[Tier][]Credits `json:"floors"`    // per offered tier, per hour: the floor in force for an hour's job
}

// WeekPrices draws the seven days from from's local midnight: for every
// hour, the floor in force (Pricing.FloorFor for a job of one hour, so an
// hour that a period touches shows its rate) of every tier base offers,
// and whether cal has availability in it. The zone is the pricing's when
// it has periods, else the calendar's.
func WeekPrices(cal *Calendar, base Prices, p *Pricing, from time.Time) (PriceWeek, error) {
	zone := cal.TimeZone
	if p != nil && len(p.Periods) > 0 {
		zone = p.TimeZone
	}
	loc, err := loadZone(zone)
	if err != nil {
		return PriceWeek{}, err
	}
	local := from.In(loc)
	start := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	end := time.Date(local.Year(), local.Month(), local.Day()+7, 0, 0, 0, 0, loc)
	windows, err := cal.Windows(start, end)
	if err != nil {
		return PriceWeek{}, err
	}
	week := PriceWeek{TimeZone: zone, MaxMultBP: p.MaxMultBP()}
	tiers := []Tier{Gold, Silver, Bronze}
	for d := 0; d < 7; d++ {
		day := time.Date(local.Year(), local.Month(), local.Day()+d, 0, 0, 0, 0, loc)
		pd := PriceDay{Date: day.Format("2006-01-02"), Day: dayNames[day.Weekday()], Available: make([]bool, 24), Floors: map[Tier][]Credits{}}
		for _, t := range tiers {
			if pricesAt(base, tierIndex(t)) > 0 {
				pd.Floors[t] = make([]Credits, 24)
			}
		}
		for h := 0; h < 24; h++ {
			at := time.Date(day.Year(), day.Month(), day.Day(), h, 0, 0, 0, loc)
			pd.Available[h] = overlapsAny(windows, at.Unix(), at.Unix()+3600)
			for t, fs := range pd.Floors {
				fs[h] = p.FloorFor(base, t, at, time.Hour)
			}
		}
		week.Days = append(week.Days, pd)
	}
	return week, nil
}

// overlapsAny reports whether sorted, non-overlapping ws meet [from, to).
func overlapsAny(ws []Window, from, to int64) bool {
	i := sort.Search(len(ws), func(i int) bool { return ws[i].End > from })
	return i < len(ws) && ws[i].Start < to
}
