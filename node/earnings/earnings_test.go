package earnings

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Offered time split at UTC midnight and the fill rate from integers:
// two GPUs offered 22:30 to 01:30 (6 GPU-hours, 3 on each day) and one
// GPU leased 90 minutes is a quarter; a rate never reads over 100%.
func TestFillRateArithmetic(t *testing.T) {
	from := time.Date(2026, 3, 9, 22, 30, 0, 0, time.UTC)
	spans := Accrue(from, from.Add(3*time.Hour), 2)
	if len(spans) != 2 || spans[0].Day != "2026-03-09" || spans[0].GPUSeconds != 3*3600 ||
		spans[1].Day != "2026-03-10" || spans[1].GPUSeconds != 3*3600 || spans[1].From != time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC).Unix() {
		t.Fatalf("spans: %+v", spans)
	}
	if s := Accrue(from, from.Add(time.Hour), 0); s != nil {
		t.Fatalf("nothing offered accrued %+v", s)
	}
	var offered int64
	for _, s := range spans {
		offered += s.GPUSeconds
	}
	if bp := fillBP(90*60, offered); bp == nil || *bp != 2500 {
		t.Fatalf("fill: %v, want 2500 bp", bp)
	}
	if bp := fillBP(2*offered, offered); bp == nil || *bp != 10000 {
		t.Fatalf("leased twice what was offered: %v, want 10000 bp at most", bp)
	}
	if fillBP(90*60, 0) != nil {
		t.Fatal("a fill rate with nothing offered")
	}
}

// A period starts at midnight UTC of the UTC date, not the local one:
// 00:30 at UTC+2 on the 10th is still the 9th in UTC.
func TestPeriodStartsAtMidnightUTC(t *testing.T) {
	now := time.Date(2026, 3, 10, 0, 30, 0, 0, time.FixedZone("X", 2*3600))
	if got := (PeriodParams{Days: 1}).From(now); !got.Equal(time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("1 day: %v", got)
	}
	if got := (PeriodParams{}).From(now); !got.Equal(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("default 7 days: %v", got)
	}
	if (PeriodParams{Days: MaxReportDays}).Validate() != nil || (PeriodParams{Days: MaxReportDays + 1}).Validate() == nil {
		t.Fatalf("the limit is not %d days", MaxReportDays)
	}
	f, _ := reflect.TypeOf(PeriodParams{}).FieldByName("Days")
	if !strings.Contains(f.Tag.Get("doc"), "at most "+strconv.Itoa(MaxReportDays)) {
		t.Fatalf("the days doc does not state MaxReportDays: %q", f.Tag.Get("doc"))
	}
}
