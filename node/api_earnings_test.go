package node

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// Offered time split at UTC midnight, a charge turned back into the
// GPU-time it bills, and the fill rate from the two, all in integers: two
// GPUs offered 22:30 to 01:30 (6 GPU-hours, 3 on each day) and one GPU
// leased 90 minutes at 0.50 credits per GPU-hour is a quarter.
func TestFillRateArithmetic(t *testing.T) {
	from := time.Date(2026, 3, 9, 22, 30, 0, 0, time.UTC)
	spans := accrue(from, from.Add(3*time.Hour), 2)
	if len(spans) != 2 || spans[0].Day != "2026-03-09" || spans[0].GPUSeconds != 3*3600 ||
		spans[1].Day != "2026-03-10" || spans[1].GPUSeconds != 3*3600 || spans[1].From != time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC).Unix() {
		t.Fatalf("spans: %+v", spans)
	}
	if s := accrue(from, from.Add(time.Hour), 0); s != nil {
		t.Fatalf("nothing offered accrued %+v", s)
	}
	l := &auction.Lease{Price: 500_000, GPUs: 1}
	charged := sched.Cost(l, 90*time.Minute)
	if charged != 750_000 {
		t.Fatalf("cost of 90 min at 0.50: %d", charged)
	}
	leased := billedGPUSeconds(charged, l.Price)
	if leased != 90*60 {
		t.Fatalf("GPU-seconds billed: %d, want %d", leased, 90*60)
	}
	// A charge rounded up to the micro-credit still gives the seconds back
	// exactly, at a price where a second costs a fraction of one: 7 s on 3
	// GPUs at 0.9 credits per GPU-hour.
	l = &auction.Lease{Price: 900_000, GPUs: 3}
	if got := billedGPUSeconds(sched.Cost(l, 7*time.Second), l.Price); got != 21 {
		t.Fatalf("7 s on 3 GPUs: %d GPU-seconds", got)
	}
	var offered int64
	for _, s := range spans {
		offered += s.GPUSeconds
	}
	if bp := fillBP(leased, offered); bp == nil || *bp != 2500 {
		t.Fatalf("fill: %v, want 2500 bp", bp)
	}
	if fillBP(leased, 0) != nil {
		t.Fatal("a fill rate with nothing offered")
	}
}

func TestPeriodStartsAtMidnightUTC(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 4, 5, 0, time.FixedZone("CET", 3600))
	if got := (PeriodParams{Days: 1}).from(now); !got.Equal(time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("1 day: %v", got)
	}
	if got := (PeriodParams{}).from(now); !got.Equal(time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("default 7 days: %v", got)
	}
	if (PeriodParams{Days: 367}).Validate() == nil {
		t.Fatal("367 days accepted")
	}
}
