package auction

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// dayNames index by time.Weekday (Sunday = 0).
var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// weeklyRule is a WeeklyWindow in a form cheap to expand: a bitmask of
// weekdays (bit = time.Weekday) and minutes after local midnight.
type weeklyRule struct {
	days       uint8
	start, end int // end may be 1440 (24:00)
}

func (w WeeklyWindow) compile() (weeklyRule, error) {
	var r weeklyRule
	if len(w.Days) == 0 || len(w.Days) > 7 {
		return r, fmt.Errorf("days: want 1..7 of %v", dayNames)
	}
	for _, d := range w.Days {
		i := dayIndex(d)
		if i < 0 {
			return r, fmt.Errorf("day %q: want one of %v", d, dayNames)
		}
		if r.days&(1<<uint(i)) != 0 {
			return r, fmt.Errorf("day %q repeated", d)
		}
		r.days |= 1 << uint(i)
	}
	var err error
	if r.start, err = parseClock(w.Start, false); err != nil {
		return r, fmt.Errorf("start: %v", err)
	}
	if r.end, err = parseClock(w.End, true); err != nil {
		return r, fmt.Errorf("end: %v", err)
	}
	return r, nil
}

func dayIndex(s string) int {
	for i, n := range dayNames {
		if n == s {
			return i
		}
	}
	return -1
}

// parseClock parses "HH:MM" into minutes after midnight. "24:00" is only
// valid as an end, so that "00:00-24:00" can say "the whole day".
func parseClock(s string, isEnd bool) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("%q: want HH:MM", s)
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:])
	if err1 != nil || err2 != nil || h < 0 || m < 0 || s[0] == '+' || s[3] == '+' {
		return 0, fmt.Errorf("%q: want HH:MM", s)
	}
	if m > 59 || h > 24 || h == 24 && (m != 0 || !isEnd) {
		return 0, fmt.Errorf("%q: out of range (00:00..23:59, or 24:00 as an end)", s)
	}
	return h*60 + m, nil
}

// ParseWeekly parses a CLI-friendly weekly spec: rules separated by ";",
// each "DAYS HH:MM-HH:MM", where DAYS is a comma list of days (mon..sun),
// ranges (mon-fri, fri-mon wraps) or "daily". An end at or before the start
// runs past midnight. Example: "mon-fri 19:00-08:00; sat,sun 00:00-24:00".
// Errors name the rule (1-based) and the part that is wrong.
func ParseWeekly(s string) ([]WeeklyWindow, error) {
	var out []WeeklyWindow
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue // allow a trailing ";"
		}
		w, err := parseWeeklyRule(part)
		if err != nil {
			return nil, fmt.Errorf("weekly rule %d %q: %v", i+1, part, err)
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, errors.New("weekly: no rules (want e.g. \"mon-fri 19:00-08:00\")")
	}
	if len(out) > MaxWeekly {
		return nil, fmt.Errorf("weekly: %d rules, limit %d", len(out), MaxWeekly)
	}
	return out, nil
}

func parseWeeklyRule(part string) (WeeklyWindow, error) {
	var w WeeklyWindow
	fields := strings.Fields(part)
	if len(fields) != 2 {
		return w, errors.New("want \"DAYS HH:MM-HH:MM\"")
	}
	days, err := parseDays(fields[0])
	if err != nil {
		return w, err
	}
	start, end, ok := strings.Cut(fields[1], "-")
	if !ok {
		return w, fmt.Errorf("times %q: want HH:MM-HH:MM", fields[1])
	}
	w = WeeklyWindow{Days: days, Start: start, End: end}
	if _, err := w.compile(); err != nil {
		return w, err
	}
	return w, nil
}

// parseDays returns the days in canonical order (mon..sun), each once, so
// that equal specs encode (and sign) identically.
func parseDays(s string) ([]string, error) {
	var mask uint8
	if s == "daily" {
		mask = 0x7f
	}
	for _, item := range strings.Split(s, ",") {
		if s == "daily" {
			break
		}
		a, b, isRange := strings.Cut(strings.ToLower(item), "-")
		i, j := dayIndex(a), dayIndex(b)
		if i < 0 || isRange && j < 0 {
			return nil, fmt.Errorf("days %q: %q is not a day or range of %v (or \"daily\")", s, item, dayNames)
		}
		if !isRange {
			j = i
		}
		for k := i; ; k = (k + 1) % 7 {
			mask |= 1 << uint(k)
			if k == j {
				break
			}
		}
	}
	var days []string
	for k := 1; k <= 7; k++ { // monday first
		if mask&(1<<uint(k%7)) != 0 {
			days = append(days, dayNames[k%7])
		}
	}
	return days, nil
}
