package sim

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestExactOptimumHandCases(t *testing.T) {
	two := []Provider{blProvider("p0", 2, blCredit, Span{0, 7200})}
	cases := []struct {
		name         string
		ps           []Provider
		js           []Job
		exact, bound int64
	}{
		// 2 GPUs for 2 h (14400): A takes both for the first hour, C and D
		// one each for the second. Everything fits: exact = bound = 14400.
		{"tight", two, []Job{blJob("a", auction.Silver, 0, 3600, 2), blJob("c", auction.Silver, 0, 3600, 1),
			blJob("d", auction.Silver, 0, 3600, 1)}, 14400, 14400},
		// B holds one GPU for both hours, so A (both GPUs for an hour) never
		// fits beside it: the best is B + C or A + C = 10800. The flow,
		// blind to contiguity, fills all 14400.
		{"contiguity", two, []Job{blJob("a", auction.Silver, 0, 3600, 2), blJob("b", auction.Silver, 0, 7200, 1),
			blJob("c", auction.Silver, 0, 3600, 1)}, 10800, 14400},
		// Two half-hour windows: a one-hour silver job fits in neither,
		// though the bound adds them up.
		{"split window", []Provider{blProvider("p0", 1, blCredit, Span{0, 1800}, Span{3600, 5400})},
			[]Job{blJob("a", auction.Silver, 0, 3600, 1)}, 0, 3600},
		// Bronze runs partly: until the first window closes (1800), or
		// from the slot boundary 3600 to the end of the second (1800).
		{"bronze partial", []Provider{blProvider("p0", 1, blCredit, Span{0, 1800}, Span{3600, 5400})},
			[]Job{blJob("a", auction.Bronze, 0, 3600, 1)}, 1800, 3600},
	}
	for _, c := range cases {
		s, d := blWorld(c.ps, c.js...)
		got, err := ExactOptimum(s, d, 7200, 3600)
		if err != nil || got != c.exact {
			t.Errorf("%s: exact %d (%v), want %d", c.name, got, err, c.exact)
		}
		if b := UpperBound(s, d, 7200, 3600); b.GPUSeconds != c.bound {
			t.Errorf("%s: bound %d, want %d", c.name, b.GPUSeconds, c.bound)
		}
	}
}

// blBruteForce is the optimum of the same model without any pruning.
func blBruteForce(x *exactSearch, k int) int64 {
	if k == len(x.jobs) {
		return 0
	}
	best := blBruteForce(x, k+1)
	for _, r := range x.jobs[k] {
		if x.fits(r) {
			x.placed[r.prov] = append(x.placed[r.prov], r)
			best = max(best, r.useful+blBruteForce(x, k+1))
			x.placed[r.prov] = x.placed[r.prov][:len(x.placed[r.prov])-1]
		}
	}
	return best
}

// On random small instances: branch-and-bound finds what brute force
// finds, and the flow bound is never below it.
func TestExactOptimumRandom(t *testing.T) {
	const horizon, slot = 8 * 3600, 3600
	var ratio float64
	n := 0
	for seed := uint64(1); seed <= 30; seed++ {
		s, d := blRandomInstance(seed, 3, 4, horizon)
		got, err := ExactOptimum(s, d, horizon, slot)
		if err != nil {
			t.Fatal(err)
		}
		x := &exactSearch{s: s, placed: make([][]exactRun, len(s.Providers))}
		for i := range d.Jobs {
			x.jobs = append(x.jobs, exactOptions(s, &d.Jobs[i], horizon, slot))
		}
		if want := blBruteForce(x, 0); got != want {
			t.Fatalf("seed %d: branch-and-bound %d, brute force %d", seed, got, want)
		}
		b := UpperBound(s, d, horizon, slot)
		if b.GPUSeconds < got {
			t.Fatalf("seed %d: bound %d below the optimum %d", seed, b.GPUSeconds, got)
		}
		if b.GPUSeconds > 0 {
			ratio += float64(got) / float64(b.GPUSeconds)
			n++
		}
	}
	if n == 0 {
		t.Fatal("every instance was empty")
	}
	t.Logf("exact/bound over %d instances: mean %.3f", n, ratio/float64(n))
}

func TestExactOptimumLimits(t *testing.T) {
	s, d := blRandomInstance(1, 5, 3, 3600)
	if _, err := ExactOptimum(s, d, 3600, 3600); err == nil {
		t.Error("5 providers accepted")
	}
	s, d = blRandomInstance(1, 2, 11, 3600)
	if _, err := ExactOptimum(s, d, 3600, 3600); err == nil {
		t.Error("11 jobs accepted")
	}
	s, d = blRandomInstance(1, 2, 2, 49*3600)
	if _, err := ExactOptimum(s, d, 49*3600, 3600); err == nil {
		t.Error("49 slots accepted")
	}
}
