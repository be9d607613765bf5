package provider

import (
	"fmt"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// BenchmarkPlan1000Commitments plans one job over a calendar of 8 GPUs
// holding 1,000 commitments: a week of hour-long gold reservations spread
// over the GPUs, with a bronze backfill running on each. Each plan asks
// for 2 GPUs at a random tier and time; most of the week is booked, so it
// walks every GPU's commitments.
func BenchmarkPlan1000Commitments(b *testing.B) {
	const gpus, commits = 8, 1000
	s := newSched(gpus)
	n := 0
	for k := 0; n < commits-gpus; k++ {
		g, slot := k%gpus, k/gpus
		start := at(time.Hour + time.Duration(slot)*80*time.Minute)
		l := mkLease(fmt.Sprint("r", k), auction.Gold, 1, start, time.Hour)
		if _, err := s.Claim(l, []int{g}, t0); err != nil {
			b.Fatal(err)
		}
		n++
	}
	for g := range gpus {
		l := mkLease(fmt.Sprint("b", g), auction.Bronze, 1, t0, 6*time.Hour)
		if _, err := s.Claim(l, []int{g}, t0); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if got := len(s.Commitments(t0)); got != commits {
		b.Fatalf("%d commitments, want %d", got, commits)
	}
	tiers := []auction.Tier{auction.Bronze, auction.Silver, auction.Gold}
	planned := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tier := tiers[i%3]
		from := t0
		if tier == auction.Gold {
			from = at(time.Duration(i%(24*7)) * time.Hour)
		}
		if _, err := s.Plan(2, tier, Span{from, from.Add(20 * time.Minute)}, t0); err == nil {
			planned++
		}
		i++
	}
	b.ReportMetric(float64(planned)/float64(b.N), "planned/op")
}
