package earnings

import "time"

// OfferedDay is one UTC day's offered GPU-time.
type OfferedDay struct {
	GPUSeconds int64 `json:"gpu_s"`
	From       int64 `json:"from"` // unix seconds: the first sample counted this day
}

// DaySpan is GPU-seconds that fall on one UTC day.
type DaySpan struct {
	Day        string
	GPUSeconds int64
	From       int64
}

// Accrue splits gpus GPUs offered from from to to at UTC midnights. The
// recorder passes whole seconds, so nothing is rounded away.
func Accrue(from, to time.Time, gpus int) []DaySpan {
	if gpus <= 0 || !to.After(from) {
		return nil
	}
	var out []DaySpan
	for t := from.UTC(); t.Before(to); {
		end := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		if to.Before(end) {
			end = to.UTC()
		}
		if secs := int64(end.Sub(t) / time.Second); secs > 0 {
			out = append(out, DaySpan{Day: t.Format(DayLayout), GPUSeconds: secs * int64(gpus), From: t.Unix()})
		}
		t = end
	}
	return out
}

// DayLayout names a UTC day in every report and store key.
const DayLayout = "2006-01-02"

// Merge sums spans per day, keeping each day's earliest From.
func Merge(spans []DaySpan) []DaySpan {
	var out []DaySpan
	for _, s := range spans {
		if k := len(out) - 1; k >= 0 && out[k].Day == s.Day {
			out[k].GPUSeconds += s.GPUSeconds
			continue
		}
		out = append(out, s)
	}
	return out
}
