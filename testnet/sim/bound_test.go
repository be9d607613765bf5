package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// No baseline beats the bound on random instances, and the bound never
// exceeds the demand or the GPU-seconds on offer.
func TestUpperBoundBeatsBaselines(t *testing.T) {
	const horizon = 2 * 86400
	for seed := uint64(1); seed <= 40; seed++ {
		s, d := blRandomInstance(seed, 6, 40, horizon)
		b := UpperBound(s, d, horizon, 3600)
		var demand, offer int64
		for _, j := range d.Jobs {
			demand += j.Duration * int64(j.GPUs)
		}
		for _, p := range s.Providers {
			for _, w := range p.Windows {
				offer += max(0, min(w.End, horizon)-w.Start) * int64(p.GPUs)
			}
		}
		if b.GPUSeconds > demand || b.GPUSeconds > offer {
			t.Fatalf("seed %d: bound %d above demand %d or offer %d", seed, b.GPUSeconds, demand, offer)
		}
		for _, name := range BaselineNames() {
			st := blMustRun(t, name, s, d, BaselineOptions{Seed: seed, Horizon: horizon})
			if u := blUseful(st); u > b.GPUSeconds {
				t.Fatalf("seed %d: %s filled %d GPU-seconds, above the bound %d", seed, name, u, b.GPUSeconds)
			}
		}
	}
}

func TestUpperBoundHandCases(t *testing.T) {
	one := func(windows ...Span) []Provider { return []Provider{blProvider("p0", 1, blCredit, windows...)} }
	usJob := blJob("us", auction.Silver, 0, 3600, 1)
	usJob.Region = "US"
	cheap := blJob("cheap", auction.Silver, 0, 3600, 1)
	cheap.MaxPrice = blCredit / 2
	cases := []struct {
		name    string
		ps      []Provider
		js      []Job
		horizon int64
		want    int64
	}{
		// Two hours of one GPU, two one-hour jobs: everything fits.
		{"tight", one(Span{0, 7200}), []Job{blJob("a", auction.Silver, 0, 3600, 1), blJob("b", auction.Silver, 0, 3600, 1)}, 7200, 7200},
		// Submitted half-way through the only slot with capacity: only
		// its second half counts.
		{"submit mid-slot", one(Span{0, 3600}), []Job{blJob("a", auction.Silver, 1800, 3600, 1)}, 7200, 1800},
		// Capacity before submission is of no use.
		{"never before submit", one(Span{0, 3600}), []Job{blJob("a", auction.Silver, 3600, 3600, 1)}, 7200, 0},
		// Waiting for a later window is.
		{"waits", one(Span{5400, 7200}), []Job{blJob("a", auction.Silver, 0, 3600, 1)}, 7200, 1800},
		{"wrong region", one(Span{0, 7200}), []Job{usJob}, 7200, 0},
		{"over budget", one(Span{0, 7200}), []Job{cheap}, 7200, 0},
		{"too many GPUs", one(Span{0, 7200}), []Job{blJob("a", auction.Silver, 0, 3600, 2)}, 7200, 0},
		// Work past the horizon is not counted.
		{"horizon", one(Span{0, 7200}), []Job{blJob("a", auction.Silver, 0, 7200, 1)}, 5000, 5000},
	}
	for _, c := range cases {
		s, d := blWorld(c.ps, c.js...)
		if b := UpperBound(s, d, c.horizon, 3600); b.GPUSeconds != c.want {
			t.Errorf("%s: bound %d, want %d", c.name, b.GPUSeconds, c.want)
		}
	}
}

func BenchmarkUpperBound(b *testing.B) {
	s, d := blRandomInstance(1, 1000, 5000, 2*86400)
	for b.Loop() {
		if ub := UpperBound(s, d, 2*86400, 3600); ub.GPUSeconds == 0 {
			b.Fatal("empty bound")
		}
	}
}

// BenchmarkUpperBoundWeek is the full-size case: 10,000 providers of 8
// models in 40 countries for a week in hourly slots.
func BenchmarkUpperBoundWeek(b *testing.B) {
	s, d := blRandomInstance(2, 10000, 30000, 7*86400)
	r := rand.New(rand.NewPCG(2, 9))
	conts := []string{"eu", "na", "as"}
	country := func(i int) string { return string(rune('A'+i/26)) + string(rune('A'+i%26)) }
	for i := range s.Providers {
		c := r.IntN(40)
		s.Providers[i].Model = fmt.Sprintf("M%d", r.IntN(8))
		s.Providers[i].Country, s.Providers[i].Continent = country(c), conts[c%3]
	}
	for i := range d.Jobs {
		switch j := &d.Jobs[i]; r.IntN(4) {
		case 0:
			j.Region = country(r.IntN(40))
		case 1:
			j.Region = conts[r.IntN(3)]
		default:
			j.Region = ""
		}
		if r.IntN(2) == 0 {
			d.Jobs[i].Models = []string{fmt.Sprintf("M%d", r.IntN(8)), fmt.Sprintf("M%d", r.IntN(8))}
		} else {
			d.Jobs[i].Models = nil
		}
	}
	for b.Loop() {
		ub := UpperBound(s, d, 7*86400, 3600)
		b.ReportMetric(float64(ub.Nodes), "nodes")
		b.ReportMetric(float64(ub.Edges), "edges")
	}
}
