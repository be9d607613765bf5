package node

import (
	"github.com/gleaner-net/gleaner/ledger"
)

// Probe is the payload of a probe entry: a renter's check of a provider's
// work against an answer it can verify. Canaries are known-answer jobs
// (the expected output hash is in the spec); replicas are one job run on
// two providers whose output hashes are compared.
type Probe struct {
	Provider string `json:"provider"`
	Lease    string `json:"lease"`                     // CID of the checked lease
	Kind     string `json:"kind"`                      // "canary" or "replica"
	Result   string `json:"result"`                    // "passed", "failed" or "inconclusive" (replicas without a majority)
	Expected string `json:"expected_sha256,omitempty"` // replicas: the majority's (a canary's stays secret)
	Got      string `json:"got_sha256"`
	Detail   string `json:"detail,omitempty"`
}

// Probe results.
const (
	ProbePassed       = "passed"
	ProbeFailed       = "failed"
	ProbeInconclusive = "inconclusive"
)

type probeAt struct {
	p    Probe
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
			e.Probes = map[string]int{}
		}
		e.Probes[pa.p.Result]++
		score := map[string]float64{ProbePassed: 1, ProbeFailed: 0}
		s, rated := score[pa.p.Result]
		if !rated {
			continue
		}
		out = append(out, ledger.Rating{Rater: pa.by, Subject: pa.p.Provider, Lease: "probe:" + pa.p.Lease, Paid: intervalPrice(l), Score: s, Time: pa.time})
	}
	return out
}

// canaryStreaks counts, per provider, the canaries self has seen it pass
// in a row since its last failure. probes are in feed order, so self's
// own are chronological.
func canaryStreaks(self string, probes []probeAt) map[string]int {
	out := map[string]int{}
	for _, pa := range probes {
		if pa.by != self || pa.p.Kind != "canary" {
			continue
		}
		switch pa.p.Result {
		case ProbePassed:
			out[pa.p.Provider]++
		case ProbeFailed:
			out[pa.p.Provider] = 0
		}
	}
	return out
}
