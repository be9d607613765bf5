package renter

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The newcomer rule. A provider without a track record has no
// reputation, so its quality credit is lower than an established
// provider's and it wins only by asking less by more than the difference.
// The rule gives it another way to a first job that does not depend on
// beating an established score: in one of every NewcomerEvery rounds for
// a small job, a newcomer (it passed a known-answer probe, never failed
// one, and has few leases) whose bid is at most T, what the established
// winner would be paid against the established bidders alone, is awarded
// the job. See clearRound for the exact rule and its price.
const (
	// DefaultNewcomerEvery: one small-job round in this many is open to
	// newcomers.
	DefaultNewcomerEvery = 10
	// NewcomerMaxGPUs and NewcomerMaxDuration bound a small job: what a
	// renter risks on a provider whose only record is a probe.
	NewcomerMaxGPUs     = 1
	NewcomerMaxDuration = time.Hour
	// NewcomerMaxLeases: a provider with more leases than this on record
	// has a history, and reputation speaks for it.
	NewcomerMaxLeases = 3
)

// How a round's winner was chosen (Explain.Rule).
const (
	// RuleSecondPrice: the lowest quality-adjusted price, paid the
	// runner-up's (auction.Clear).
	RuleSecondPrice = "second-price"
	// RuleNewcomer: a newcomer, in a round open to newcomers.
	RuleNewcomer = "newcomer"
	// RulePayAsBid: the winner is paid its own bid (WithPayAsBid; the
	// simulator's alternative rule, never node's).
	RulePayAsBid = "pay-as-bid"
)

// TrackRecord is what the ledger shows of a provider's history, as the
// newcomer rule reads it.
type TrackRecord struct {
	Leases       int // leases with a journaled outcome
	ProbesPassed int // known-answer probes passed: canaries, replica comparisons
	ProbesFailed int
}

// Newcomer reports whether t makes its provider a newcomer: few leases,
// at least one probe passed and none failed.
func (t TrackRecord) Newcomer() bool {
	return t.Leases <= NewcomerMaxLeases && t.ProbesPassed > 0 && t.ProbesFailed == 0
}

// Tracker is an optional part of Trust: a Trust that also implements it
// opens rounds to newcomers. node's reads the ledger's evidence (leases,
// probes) for each provider.
type Tracker interface {
	Track(provider string) TrackRecord
}

// WithNewcomers opens one in every small-job rounds to newcomers (default
// DefaultNewcomerEvery); a negative every opens none. It has effect only
// with a Trust that implements Tracker.
func WithNewcomers(every int) Option { return func(a *Auctioneer) { a.newcomerEvery = every } }

// smallJob reports whether spec may go to a newcomer.
func smallJob(spec *auction.JobSpec) bool {
	return spec.Resources.GPUs <= NewcomerMaxGPUs && spec.Duration.Max > 0 && spec.Duration.Max <= NewcomerMaxDuration
}

// newcomers is the set of ranked bidders that are newcomers, when this
// round is open to them (nil otherwise). Rounds are counted per
// auctioneer: the first small-job round that ranks a bid is open, then one
// in every newcomerEvery, so however rounds interleave at most
// ceil(n / newcomerEvery) of n small-job rounds are. Whether a round is
// open depends on no bid, which keeps the rule truthful.
func (a *Auctioneer) newcomers(spec *auction.JobSpec, req Request, ranked []auction.Ranked) map[string]bool {
	tr, ok := a.trust.(Tracker)
	if !ok || a.newcomerEvery <= 0 || req.Pin != "" || len(ranked) == 0 || !smallJob(spec) {
		return nil
	}
	if (a.smallRounds.Add(1)-1)%uint64(a.newcomerEvery) != 0 {
		return nil
	}
	out := map[string]bool{}
	for _, r := range ranked {
		if tr.Track(r.Bid.Provider).Newcomer() {
			out[r.Bid.Provider] = true
		}
	}
	return out
}

// clearRound picks a round's winner and price. Without newcomers, or
// without two established bids to price them against, it is
// auction.Clear. Otherwise, with w and P Clear's winner and price over
// everyone, and T Clear's price over the established (not newcomer) bids
// alone:
//
//   - w established: the newcomer with the lowest bid (then provider ID),
//     if that bid is at most T, wins instead, paid min(T, the next
//     newcomer's bid). Else w wins at P.
//   - w a newcomer: it wins, paid max(P, S), where S = min(T, the other
//     newcomers' lowest bid) when the best other bid is established (had
//     w lost on price, it would still have won the newcomer slot below S),
//     and S = 0 otherwise.
//
// Each winner is paid the highest bid at which it would still have won,
// which depends on everyone's bids but its own: the rule is as truthful
// as Clear. The price is within [own bid, max_price], and a newcomer
// chosen over an established winner is paid at most T, what the renter
// would have paid the established winner against the established bidders;
// T is itself at most their runner-up's bid + QualityCap.
func clearRound(ranked []auction.Ranked, maxPrice auction.Credits, newcomer map[string]bool) (auction.Ranked, auction.Credits, string, bool) {
	w, p, ok := auction.Clear(ranked, maxPrice)
	if !ok || len(newcomer) == 0 {
		return w, p, RuleSecondPrice, ok
	}
	var est []auction.Ranked
	for _, r := range ranked {
		if !newcomer[r.Bid.Provider] {
			est = append(est, r)
		}
	}
	// T needs two established bids: a lone one's price is its own bid,
	// and it could then shut newcomers out by lowering it.
	if len(est) < 2 || len(est) == len(ranked) {
		return w, p, RuleSecondPrice, ok
	}
	_, T, estOK := auction.Clear(est, maxPrice)
	if !estOK {
		return w, p, RuleSecondPrice, ok
	}
	if newcomer[w.Bid.Provider] {
		var other *auction.Ranked // the best bid but w's
		for i := range ranked {
			if r := &ranked[i]; r.Bid.Provider != w.Bid.Provider && (other == nil || auction.Better(r, other)) {
				other = r
			}
		}
		if newcomer[other.Bid.Provider] {
			return w, p, RuleSecondPrice, ok
		}
		if s := min(T, lowestBid(ranked, newcomer, w.Bid.Provider, maxPrice)); s > p {
			return w, s, RuleNewcomer, ok
		}
		return w, p, RuleSecondPrice, ok
	}
	var n *auction.Ranked // the newcomer with the lowest bid
	for i := range ranked {
		r := &ranked[i]
		if newcomer[r.Bid.Provider] && (n == nil || r.Bid.Price < n.Bid.Price ||
			r.Bid.Price == n.Bid.Price && r.Bid.Provider < n.Bid.Provider) {
			n = r
		}
	}
	if n.Bid.Price > T || n.Bid.Price <= 0 {
		return w, p, RuleSecondPrice, ok
	}
	return *n, min(T, lowestBid(ranked, newcomer, n.Bid.Provider, maxPrice)), RuleNewcomer, true
}

// lowestBid is the lowest bid of a newcomer other than skip; maxPrice
// when there is none.
func lowestBid(ranked []auction.Ranked, newcomer map[string]bool, skip string, maxPrice auction.Credits) auction.Credits {
	low := maxPrice
	for _, r := range ranked {
		if newcomer[r.Bid.Provider] && r.Bid.Provider != skip {
			low = min(low, r.Bid.Price)
		}
	}
	return low
}
