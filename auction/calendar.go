package auction

import (
	"errors"
	"fmt"
	"sort"
	"time"

	// Calendars name IANA zones; embedding the database makes expansion
	// identical on every node, including containers without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// Calendar limits: bound the work Windows does for a hostile calendar.
const (
	MaxWeekly        = 32
	MaxCalendarSpan  = 400 * 24 * time.Hour // longest [from, to) Windows expands
	maxCalendarLists = 256                  // one-offs, blackouts
)

// Validate checks the time zone, weekly rules, one-offs and blackouts.
func (c *Calendar) Validate() error {
	if _, err := c.location(); err != nil {
		return err
	}
	if len(c.Weekly) > MaxWeekly {
		return fmt.Errorf("weekly: %d rules, limit %d", len(c.Weekly), MaxWeekly)
	}
	for i, w := range c.Weekly {
		if _, err := w.compile(); err != nil {
			return fmt.Errorf("weekly[%d]: %v", i, err)
		}
	}
	for _, l := range []struct {
		name string
		ws   []Window
	}{{"one_off", c.OneOff}, {"blackouts", c.Blackouts}} {
		name, ws := l.name, l.ws
		if len(ws) > maxCalendarLists {
			return fmt.Errorf("%s: %d windows, limit %d", name, len(ws), maxCalendarLists)
		}
		for i, w := range ws {
			if w.Start >= w.End {
				return fmt.Errorf("%s[%d]: start not before end", name, i)
			}
		}
	}
	return nil
}

func (c *Calendar) location() (*time.Location, error) {
	// "" and "Local" would mean UTC or the machine's zone, so the same
	// calendar would expand differently on different nodes.
	if c.TimeZone == "" || c.TimeZone == "Local" {
		return nil, fmt.Errorf("time_zone: want an IANA zone such as Europe/Berlin, got %q", c.TimeZone)
	}
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time_zone: %v", err)
	}
	return loc, nil
}

// Windows expands the calendar over [from, to): weekly rules in the owner's
// zone, united with one-off windows, minus blackouts, merged (touching
// windows become one) and clipped. A calendar with neither weekly rules nor
// one-offs is always available. Instants are unix seconds, so a 19:00-08:00
// night across a DST change is 12 or 14 real hours, as the clock says.
// Wall times follow time.Date: one that does not exist (spring forward)
// moves forward by the gap, one that occurs twice (fall back) takes the
// later instant.
func (c *Calendar) Windows(from, to time.Time) ([]Window, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if to.Before(from) {
		return nil, errors.New("calendar: to before from")
	}
	if to.Sub(from) > MaxCalendarSpan {
		return nil, fmt.Errorf("calendar: span %s exceeds %s", to.Sub(from), MaxCalendarSpan)
	}
	f, t := from.Unix(), to.Unix()
	if f >= t {
		return nil, nil
	}
	var ws []Window
	if len(c.Weekly) == 0 && len(c.OneOff) == 0 {
		ws = []Window{{f, t}}
	} else {
		loc, _ := c.location() // validated above
		ws = append(c.expandWeekly(from.In(loc), to.In(loc), loc), c.OneOff...)
	}
	ws = subtract(mergeWindows(ws), mergeWindows(append([]Window(nil), c.Blackouts...)))
	return clip(ws, f, t), nil
}

// expandWeekly emits every weekly window that can touch [from, to). It walks
// civil dates (in UTC, where days are always 24 h) from the day before from,
// since a window starting then may run past midnight into the range.
func (c *Calendar) expandWeekly(from, to time.Time, loc *time.Location) []Window {
	rules := make([]weeklyRule, 0, len(c.Weekly))
	for _, w := range c.Weekly {
		r, _ := w.compile() // validated by the caller
		rules = append(rules, r)
	}
	day := time.Date(from.Year(), from.Month(), from.Day()-1, 0, 0, 0, 0, time.UTC)
	last := time.Date(to.Year(), to.Month(), to.Day(), 0, 0, 0, 0, time.UTC)
	var ws []Window
	for ; !day.After(last); day = day.AddDate(0, 0, 1) {
		y, m, d := day.Date()
		for _, r := range rules {
			if r.days&(1<<uint(day.Weekday())) == 0 {
				continue
			}
			endDay := d
			if r.end <= r.start {
				endDay++ // runs past midnight
			}
			s := time.Date(y, m, d, r.start/60, r.start%60, 0, 0, loc).Unix()
			e := time.Date(y, m, endDay, r.end/60, r.end%60, 0, 0, loc).Unix()
			if s < e { // a window wholly inside a DST gap can collapse
				ws = append(ws, Window{s, e})
			}
		}
	}
	return ws
}

// mergeWindows sorts ws in place and unites overlapping or touching windows.
func mergeWindows(ws []Window) []Window {
	sort.Slice(ws, func(i, j int) bool { return ws[i].Start < ws[j].Start })
	out := ws[:0]
	for _, w := range ws {
		if n := len(out); n > 0 && w.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, w.End)
			continue
		}
		out = append(out, w)
	}
	return out
}

// subtract removes the merged, sorted cuts from the merged, sorted ws.
func subtract(ws, cuts []Window) []Window {
	var out []Window
	j := 0
	for _, w := range ws {
		for j < len(cuts) && cuts[j].End <= w.Start {
			j++
		}
		start := w.Start
		for k := j; k < len(cuts) && cuts[k].Start < w.End; k++ {
			if cuts[k].Start > start {
				out = append(out, Window{start, cuts[k].Start})
			}
			start = max(start, cuts[k].End)
		}
		if start < w.End {
			out = append(out, Window{start, w.End})
		}
	}
	return out
}

func clip(ws []Window, from, to int64) []Window {
	var out []Window
	for _, w := range ws {
		w.Start, w.End = max(w.Start, from), min(w.End, to)
		if w.Start < w.End {
			out = append(out, w)
		}
	}
	return out
}

// AvailableFor is how long the availability that contains now lasts from
// now: the remainder of the window containing now, continued through any
// windows that touch it. It is 0 when now lies in no window. ws must be
// sorted and non-overlapping, as Windows and Offer.Validate guarantee.
func AvailableFor(ws []Window, now time.Time) time.Duration {
	return time.Duration(availableSecs(ws, now.Unix())) * time.Second
}

func availableSecs(ws []Window, now int64) int64 {
	i := sort.Search(len(ws), func(i int) bool { return ws[i].End > now })
	if i == len(ws) || ws[i].Start > now {
		return 0
	}
	end := ws[i].End
	for j := i + 1; j < len(ws) && ws[j].Start <= end; j++ {
		end = max(end, ws[j].End)
	}
	return end - now
}
