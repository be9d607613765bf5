package trust

import (
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
)

// probeAt is a probe entry as reputation reads it: a renter's check of a
// provider's work (a canary's known answer, or replicas compared).
type probeAt struct {
	p    ledger.Probe
	by   string
	time int64
}

// probeRatings turns probe entries into ratings: a pass rates 1, a
// failure 0, weighted by the checked lease's interval price; inconclusive
// probes rate nothing. Only probes of leases the prober itself rented
// count, so nobody can probe (and defame) a provider it never paid. A
// probe rates apart from the same lease's outcome (its own key), so a
// job that completed with a wrong answer counts as both.
func probeRatings(probes []probeAt, fs *fraudScan, evOf func(string) *Evidence) []ledger.Rating {
	var out []ledger.Rating
	for _, pa := range probes {
		l, ok := fs.verifiedLease(pa.p.Lease)
		if !ok || l.Renter != pa.by || l.Provider != pa.p.Provider {
			continue
		}
		e := evOf(pa.p.Provider)
		if e.Probes == nil {
			e.Probes = map[ledger.ProbeResult]int{}
		}
		e.Probes[pa.p.Result]++
		score := map[ledger.ProbeResult]float64{ledger.ProbePassed: 1, ledger.ProbeFailed: 0}
		s, rated := score[pa.p.Result]
		if !rated {
			continue
		}
		out = append(out, ledger.Rating{Rater: pa.by, Subject: pa.p.Provider, Lease: "probe:" + pa.p.Lease, Paid: sched.IntervalPrice(l), Score: s, Time: pa.time})
	}
	return out
}

// canaryStreaks counts, per provider, the canaries self has seen it pass
// in a row since its last failure. probes are in feed order, so self's
// own are chronological.
func canaryStreaks(self string, probes []probeAt) map[string]int {
	out := map[string]int{}
	for _, pa := range probes {
		if pa.by != self || pa.p.Kind != ledger.ProbeCanary {
			continue
		}
		switch pa.p.Result {
		case ledger.ProbePassed:
			out[pa.p.Provider]++
		case ledger.ProbeFailed:
			out[pa.p.Provider] = 0
		}
	}
	return out
}
