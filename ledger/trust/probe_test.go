package trust

import (
	"testing"

	"github.com/gleaner-net/gleaner/ledger"
)

// The streaks behind node's TestCanaryRateFallsWithPassesAndResets: a
// canary passed extends the run, a failure resets it.
func TestCanaryStreaksFromProbes(t *testing.T) {
	probes := func(results ...ledger.ProbeResult) []probeAt {
		var out []probeAt
		for _, r := range results {
			out = append(out, probeAt{p: ledger.Probe{Provider: "p", Kind: ledger.ProbeCanary, Result: r}, by: "me"})
		}
		return out
	}
	cases := []struct {
		results []ledger.ProbeResult
		streak  int
		rate    float64
	}{
		{nil, 0, 1},
		{[]ledger.ProbeResult{ledger.ProbePassed}, 1, 0.5},
		{[]ledger.ProbeResult{ledger.ProbePassed, ledger.ProbePassed, ledger.ProbePassed}, 3, 0.25},
		{[]ledger.ProbeResult{ledger.ProbePassed, ledger.ProbePassed, ledger.ProbeFailed}, 0, 1},
		{[]ledger.ProbeResult{ledger.ProbeFailed, ledger.ProbePassed}, 1, 0.5},
		{[]ledger.ProbeResult{ledger.ProbePassed, ledger.ProbeInconclusive, ledger.ProbePassed}, 2, 1.0 / 3},
	}
	for _, c := range cases {
		streak := canaryStreaks("me", probes(c.results...))["p"]
		if streak != c.streak {
			t.Errorf("%v: streak %d, want %d", c.results, streak, c.streak)
		}
	}
	// Other renters' probes and replica probes do not move this renter's streak.
	others := []probeAt{{p: ledger.Probe{Provider: "p", Kind: ledger.ProbeCanary, Result: ledger.ProbePassed}, by: "someone"},
		{p: ledger.Probe{Provider: "p", Kind: ledger.ProbeReplica, Result: ledger.ProbePassed}, by: "me"}}
	if s := canaryStreaks("me", others)["p"]; s != 0 {
		t.Errorf("streak %d from probes that are not this renter's canaries", s)
	}
}
