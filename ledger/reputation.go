package ledger

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Rating is one rater's opinion of a subject after a lease. It is the
// payload of a TypeRating entry. Reputation trusts Paid as given: callers
// must only pass ratings whose Lease they have verified (co-signed, and
// settled for Paid) — that check is what makes a rating cost something.
type Rating struct {
	Rater   string          `cbor:"1,keyasint" json:"rater"`
	Subject string          `cbor:"2,keyasint" json:"subject"`
	Lease   string          `cbor:"3,keyasint" json:"lease"` // CID
	Paid    auction.Credits `cbor:"4,keyasint" json:"paid"`
	Score   float64         `cbor:"5,keyasint" json:"score"` // 0 (bad) .. 1 (good)
	Time    int64           `cbor:"6,keyasint" json:"time"`  // unix seconds
}

// Tuning. HalfLife makes old behaviour fade so that a provider cannot
// coast on a reputation earned long ago. Damping is EigenTrust's
// teleport probability back to the pre-trusted set: larger values shrink
// how far trust travels from peers we know. NetworkWeight is how many
// "units of evidence" the network's opinion counts for against our own.
const (
	HalfLife      = 30 * 24 * time.Hour
	Damping       = 0.15
	NetworkWeight = 4.0
	maxIterations = 100
	convergedL1   = 1e-10
	futureSkew    = 10 * time.Minute
	creditUnit    = 1_000_000 // auction.Credits per credit
)

// Reputation computes self's view of every peer, in [0,1).
//
// Only ratings backed by a paid lease count (Paid > 0); a rater's
// self-ratings, ratings dated in the future and out-of-range scores are
// dropped; each (rater, lease) counts once (the latest). Each rating
// weighs decay(age) * log2(1 + credits paid): paying more counts more, but
// sublinearly so that one large lease cannot buy a reputation.
//
// Two sources are combined. Self's own ratings give beta evidence
// (a = Σw·score, b = Σw·(1-score)). Personalised EigenTrust spreads trust
// from the pre-trusted set (self with half the mass, the rest among the
// peers in paidBy in proportion to the amount exchanged) along local trust
// max(a-b, 0) normalised per rater; g is a peer's trust relative to the
// most trusted peer. The score is (a + NetworkWeight·g) / (a + b +
// NetworkWeight + 1): the extra unit of failure is a pessimistic prior, so
// a peer with no evidence and no trust path scores 0.
//
// New identities therefore have no reputation: peers scoring 0 (and self)
// are absent from the result, and callers should treat absence as "probe
// with small jobs". Sybils gain nothing by rating each other: without a
// paid rating from a peer that self's trust reaches, their trust is 0.
func Reputation(self string, ratings []Rating, paidBy map[string]auction.Credits, now time.Time) map[string]float64 {
	g := newGraph(self)
	latest := make(map[[2]string]int, len(ratings))
	for i := range ratings {
		r := &ratings[i]
		if r.Paid <= 0 || r.Rater == "" || r.Subject == "" || r.Rater == r.Subject ||
			!(r.Score >= 0 && r.Score <= 1) || time.Unix(r.Time, 0).After(now.Add(futureSkew)) {
			continue
		}
		k := [2]string{r.Rater, r.Lease}
		if j, ok := latest[k]; !ok || ratings[j].Time <= r.Time {
			latest[k] = i
		}
	}
	// Walk ratings in input order (not map order) so that float sums, and
	// hence scores, are reproducible bit for bit.
	for i := range ratings {
		r := &ratings[i]
		if j, ok := latest[[2]string{r.Rater, r.Lease}]; !ok || j != i {
			continue
		}
		age := max(now.Sub(time.Unix(r.Time, 0)), 0)
		w := math.Exp2(-float64(age)/float64(HalfLife)) * math.Log2(1+float64(r.Paid)/creditUnit)
		g.add(g.id(r.Rater), g.id(r.Subject), w*r.Score, w*(1-r.Score))
	}
	pre := make([]float64, 0, len(paidBy)+1)
	preIdx := []int32{0}
	var paidSum float64
	for _, p := range slices.Sorted(maps.Keys(paidBy)) {
		if amt := paidBy[p]; p != self && amt != 0 {
			a := math.Abs(float64(amt))
			preIdx = append(preIdx, g.id(p))
			pre = append(pre, a)
			paidSum += a
		}
	}
	pv := make([]float64, len(g.names))
	pv[0] = 1
	if paidSum > 0 {
		pv[0] = 0.5
		for k, a := range pre {
			pv[preIdx[k+1]] += 0.5 * a / paidSum
		}
	}
	t := g.eigenTrust(pv)

	var top float64
	for j := 1; j < len(t); j++ {
		top = max(top, t[j])
	}
	out := make(map[string]float64)
	for j := 1; j < len(g.names); j++ {
		var rel float64
		if top > 0 {
			rel = t[j] / top
		}
		a, b := g.direct[j][0], g.direct[j][1]
		if s := (a + NetworkWeight*rel) / (a + b + NetworkWeight + 1); s > 0 {
			out[g.names[j]] = s
		}
	}
	return out
}
