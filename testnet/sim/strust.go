package sim

import (
	"fmt"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
)

// simTrust is one renter's view of providers (renter.Trust): the ledger's
// own reputation function (ledger.Reputation: beta evidence from its own
// ratings plus personalised EigenTrust over everyone's paid ratings),
// recomputed every Config.Reputation of virtual time over the ratings
// all renters have published so far (the replicated feeds, in memory).
// Round trips are what it would measure: the network's base latency.
type simTrust struct {
	m      *market
	r      *simRenter
	mu     sync.Mutex
	scores map[string]float64
	at     time.Duration // when scores were computed; -1 never
	paid   map[string]auction.Credits
}

func newSimTrust(m *market, r *simRenter) *simTrust {
	return &simTrust{m: m, r: r, at: -1, paid: map[string]auction.Credits{}}
}

func (t *simTrust) Score(provider string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at < 0 || t.m.w.now-t.at >= t.m.cfg.Reputation {
		t.scores = ledger.Reputation(t.r.id, t.m.ratings, t.paid, t.m.w.Now())
		t.at = t.m.w.now
		t.m.stats.ReputationPasses++
	}
	return t.scores[provider]
}

func (t *simTrust) Convicted(string) bool { return false }

// Track is renter.Tracker's, which opens one small-job round in ten to
// newcomers: the provider's leases with an outcome, everyone's, as the
// replicated ledger shows them. The simulator runs no separate probes, so
// a lease whose result its renter accepted counts as a probe passed and
// one it caught or gave up as a probe failed.
func (t *simTrust) Track(provider string) renter.TrackRecord {
	return t.m.tracks[provider]
}

func (t *simTrust) RTT(provider string) (time.Duration, bool) {
	p := t.m.byPeer[provider]
	if p == nil {
		return 0, false
	}
	return t.m.baseRTT(t.r.continent, p.sp.Continent), true
}

// rate publishes the renter's rating of a provider after a lease, backed
// by what it paid (unpaid leases carry no weight, as in the ledger).
func (t *simTrust) rate(provider string, paid auction.Credits, score float64) {
	t.mu.Lock()
	t.paid[provider] += paid
	t.mu.Unlock()
	tr := t.m.tracks[provider]
	tr.Leases++
	if score >= 1 {
		tr.ProbesPassed++
	} else {
		tr.ProbesFailed++
	}
	t.m.tracks[provider] = tr
	t.m.nRatings++
	t.m.ratings = append(t.m.ratings, ledger.Rating{Rater: t.r.id, Subject: provider,
		Lease: fmt.Sprint("lease-", t.m.nRatings), Paid: paid, Score: score, Time: t.m.w.Now().Unix()})
	t.m.feedAppend()
}
