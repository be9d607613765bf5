package auction

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxDurationDays bounds the days part, so that a duration never
// overflows time.Duration (about 292 years).
const maxDurationDays = 36500

// DurationForms says what ParseDuration accepts, for error messages.
const DurationForms = "a duration such as 90s, 90m, 1h30m, 2d or 1d12h"

// ParseDuration is the one duration syntax of job specs, queries and CLI
// flags: Go's (90m, 1h30m, 1.5h) with an optional leading whole number of
// days (2d, 1d12h), since jobs and windows are planned in days and "48h"
// is only a workaround. It is never negative: nothing in gleaner lasts
// less than nothing, so a sign is refused rather than taken. Callers check
// their own ranges and resolution.
func ParseDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not %s", s, DurationForms)
	}
	return d, nil
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" || strings.ContainsAny(s[:1], "+-") {
		return 0, errors.New("empty or signed")
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseUint(s[:i], 10, 32)
		if err != nil || n > maxDurationDays {
			return 0, errors.New("bad days")
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, nil
		}
		if strings.ContainsAny(s[:1], "+-") {
			return 0, errors.New("signed rest")
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil || rest > math.MaxInt64-days {
		return 0, errors.New("bad or too long")
	}
	return days + rest, nil
}
