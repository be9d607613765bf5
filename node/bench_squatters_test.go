package node

import (
	"context"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
)

// BenchmarkRotatingSquatters measures honest renters against the attack
// of squatters_test.go (a fresh identity every 2-4 s that awards the
// provider's only GPU and never starts), on real daemons: per iteration
// one job (silver, max_reauctions 0, as submitted by default) from each
// of
//
//	paid: a renter that has paid the provider before;
//	new:  a fresh renter (a newcomer, like the attacker);
//	off:  a fresh renter, with the newcomer rule off (the baseline: how
//	      every renter fared before it).
//
// Each job is submitted while a fresh award of the attacker's holds the
// GPU, up to 3 s after it was made (within its grace, or past it). It
// reports, per kind, the share of jobs that ran within 20 s of their
// submission (ok-%) and the mean time to run of those that did
// (s-to-run). One iteration takes about 20 s; later ones first wait out
// the off phase's awards (up to the 30 s start deadline).
func BenchmarkRotatingSquatters(b *testing.B) {
	requireDemoImage(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	prov, paid, q, _ := squatted(b, ctx)
	waitFor(b, 30*time.Second, "an attacker's award to hold the GPU", func() bool { return len(q.awards()) > 0 })

	type tally struct {
		ok, n int
		took  time.Duration
	}
	kinds := []string{"paid", "new", "off"}
	res := map[string]*tally{}
	for _, k := range kinds {
		res[k] = &tally{}
	}
	var lingering []string // the off phase's awards, which hold until their deadline
	for b.Loop() {
		waitFor(b, time.Minute, "the baseline's awards to expire", func() bool {
			for _, job := range lingering {
				if prov.providerJobs.Holds(job) {
					return false
				}
			}
			return true
		})
		for _, k := range kinds {
			rn := paid
			if k != "paid" {
				rn = renterOf(b, ctx, prov)
			}
			from := len(q.awards())
			if k == "off" {
				prov.providerJobs.SetNewcomerGrace(-1)
			}
			// Submitted while an award of the attacker's holds the GPU, at
			// a random point of its grace or past it.
			waitFor(b, time.Minute, "a fresh award of the attacker's to hold the GPU", func() bool {
				for _, job := range q.awards()[from:] {
					if prov.providerJobs.Holds(job) {
						return true
					}
				}
				return false
			})
			time.Sleep(mrand.N(3 * time.Second))
			ran, took, j := honestRun(b, rn, linesSpec("honest-"+k, "1s", 1), 20*time.Second)
			if k == "off" {
				prov.providerJobs.SetNewcomerGrace(0)
				lingering = q.awards()[from:]
			}
			t := res[k]
			t.n++
			if ran {
				t.ok++
				t.took += took
			} else if k != "off" {
				b.Logf("%s: %s (%s)", k, j.State, j.Error)
			}
			// The GPU free again (the honest job over) before the next.
			waitFor(b, time.Minute, "the honest job to end", func() bool {
				j, err := rn.renterJobs.Get(j.ID)
				return err == nil && renting.Terminal(j.State)
			})
		}
	}
	for _, k := range kinds {
		t := res[k]
		b.ReportMetric(100*float64(t.ok)/float64(max(t.n, 1)), k+"-ok-%")
		mean := 0.0
		if t.ok > 0 {
			mean = t.took.Seconds() / float64(t.ok)
		}
		b.ReportMetric(mean, k+"-s-to-run")
	}
	b.ReportMetric(float64(len(q.awards())), "squat-awards")
}
