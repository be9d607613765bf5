package renter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Request is one job to place.
type Request struct {
	JobID string
	// SpecYAML is the spec exactly as providers receive it (without what
	// only the renter may know, such as verify); bids must name its
	// SpecHash, as the providers parse it.
	SpecYAML []byte
	// Spec is the renter's own parse, which decides feasibility, admission
	// and ranking; nil means SpecYAML's.
	Spec *auction.JobSpec
	// Exclude names providers never to ask: those that lost this job or
	// could not start it. Auction only reads it.
	Exclude map[string]bool
	// LastResort names providers awarded only after every other bidder:
	// those that preempted this job. It may go back to them (a preemption
	// is no failure), but one that just took its GPUs back for a better
	// tier is likely to again. Auction only reads it.
	LastResort map[string]bool
	// Pin, when set, is the only provider asked (a canary, `--provider`).
	Pin string
	// Only, when set, is the providers the round may ask: a gang
	// member's share of the book in a placement's parallel rounds
	// (GangShares), disjoint from its siblings', so that no two of them
	// win one provider. Auction only reads it.
	Only map[string]bool
	// Group, when set, makes this a replica: siblings' auctions run one at
	// a time, and none of them goes to a provider another holds.
	Group *Group
	// BillingSec is the billing interval the lease states; it must be
	// positive.
	BillingSec int64
}

// Result is a round that leased: the lease, its co-signed wire bytes
// (verified: the provider signed exactly the body proposed), and how it
// came about. Explain is set on every return, with or without an error.
type Result struct {
	Lease   *auction.Lease
	Raw     []byte
	Explain *Explain
	// Attempt is Place's: the re-auctions this job has spent, counting
	// Policy.Attempt; 0 from Auction.
	Attempt int
	// Races is Place's: the immediate re-quotes after lost races, in all.
	Races int
}

// Auction runs one round: the eligible offers (not excluded, not
// convicted, only the pin if one is set, not a sibling's provider), the
// feasible ones among them, quotes from the cheapest K by the tier's floor,
// the bids that pass every check, admission, ranking, clearing at the
// quality-adjusted second price (auction.Clear; in a round open to
// newcomers, clearRound), and the award, falling back to the next best
// bidder while the winner refuses. A round that leases nothing returns a
// *NoMatchError.
func (a *Auctioneer) Auction(ctx context.Context, req Request) (Result, error) {
	ex := &Explain{Quotes: []QuoteOutcome{}}
	res := Result{Explain: ex}
	if req.JobID == "" || req.BillingSec <= 0 {
		return res, errors.New("renter: a request needs a job ID and a positive billing interval")
	}
	sent, err := a.sentSpec(req.SpecYAML)
	if err != nil {
		return res, err
	}
	spec := req.Spec
	if spec == nil {
		spec = sent.spec
	}
	var siblings map[string]bool
	if req.Group != nil {
		leave, held, err := req.Group.enter(ctx, req.JobID)
		if err != nil {
			return res, err
		}
		defer leave()
		siblings = held
	}
	book, left := a.eligible(a.offers.Snapshot(), req, siblings)
	env := auction.Env{Now: a.clock.Now(), RTT: a.preQuoteRTT(spec), Reputation: a.trust}
	ok, rejected := auction.Feasible(spec, book, env)
	ex.Considered, ex.Feasible, ex.Funnel = len(book), len(ok), auction.Funnel(rejected)
	if a.noDiagnosis {
		ex.Rejected = slices.Clone(rejected[:min(len(rejected), MaxRejected)])
	} else {
		ex.Rejected, ex.Relax = diagnose(spec, book, rejected, len(ok), env)
	}
	if len(ok) == 0 {
		return res, &NoMatchError{Considered: len(book), Excluded: left}
	}
	ok, ex.Undisturbed = preferUndisturbed(ok, spec, env.Now, a.candidates)
	if len(ok) == 0 {
		return res, &NoMatchError{Considered: len(book), Excluded: left}
	}
	nonce := make([]byte, 16)
	if _, err := a.nonces.Read(nonce); err != nil {
		return res, fmt.Errorf("renter: quote nonce: %w", err)
	}
	// Equal floors and equal bids are ordered by this round's draw, not
	// by provider ID, so concurrent renters ask and award different
	// providers among equals (issue 33's herding).
	env.Tiebreak = auction.TiebreakOf(nonce)
	cands := cheapest(ok, spec.Tier, a.candidates, env.Tiebreak)
	bids, outcomes, probes := a.requestQuotes(ctx, req.JobID, nonce, req.SpecYAML, sent, cands, a.probeWait(spec))
	ex.Quotes = outcomes
	rtts := newRoundRTT(a.trust.RTT, cands, probes, spec.Placement.MaxRTT > 0)
	env.RTT = rtts.rtt // admission and ranking use what was just measured
	offers := make(map[string]*auction.Offer, len(cands))
	for _, o := range cands {
		offers[o.Provider] = o
	}
	plain := make([]auction.Bid, 0, len(bids))
	rawBid := make(map[string][]byte, len(bids))
	for _, b := range bids {
		plain = append(plain, b.bid)
		rawBid[b.bid.Provider] = b.raw
	}
	env.Now = a.clock.Now() // the quotes took time: admission sees bids as they stand now
	admitted, notAdmitted := auction.AdmitBids(spec, plain, offers, env)
	ranked := auction.Rank(spec, admitted, offers, env)
	ex.NotAdmitted = rtts.explain(ex.Quotes, notAdmitted, ranked)
	ex.Ranked = ranked // dropProvider below copies; this stays the full ranking
	newcomer := a.newcomers(spec, req, ranked)
	if newcomer != nil {
		ex.Newcomers = slices.Sorted(maps.Keys(newcomer))
	}
	// raced: at least one award lost a race for GPUs, or a provider
	// declined because its free GPUs were promised to other live quotes
	// (held), and every award tried either lost a race too or went
	// unanswered (a provider slow under a burst). Capacity may well be
	// free, so Place asks again at once.
	// unanswered: no provider answered at all (each timed out or its
	// stream failed), as providers slow under a burst do; the same then.
	held, unanswered := false, len(outcomes) > 0
	for _, q := range outcomes {
		held = held || q.Declined == auction.ReasonHeld
		unanswered = unanswered && q.Error != "" && !strings.HasPrefix(q.Error, badBid)
	}
	raced, lostRace, tried := true, false, 0
	for len(ranked) > 0 {
		// The last-resort providers' bids clear only once no other is left.
		pool := filterLastResort(ranked, req.LastResort, false)
		if len(pool) == 0 {
			pool = ranked
		}
		winner, price, rule, ok := clearRound(pool, spec.MaxPrice, newcomer)
		if !ok && len(pool) < len(ranked) {
			ranked = filterLastResort(ranked, req.LastResort, true)
			continue
		}
		if !ok {
			break
		}
		ex.SecondScore = price
		if a.payAsBid {
			price, rule = winner.Bid.Price, RulePayAsBid
		}
		ex.Winner, ex.ClearingPrice, ex.Rule = winner.Bid.Provider, price, rule
		ex.Clearing = clearingOf(pool, winner, price, rule, spec.MaxPrice)
		if tried == 0 {
			// The losers' holds end before the award, not after it: the
			// award's trip and the provider's durable write take longer
			// than the quotes did, and in a burst other renters' rounds
			// are declined for those GPUs meanwhile (issue 33). Should
			// the winner refuse, the next bid's award may race, and the
			// round is then asked again at once.
			a.release(ctx, req.JobID, nonce, outcomes, winner.Bid.Provider)
		}
		lease, raw, out := a.award(ctx, req, spec, winner, price, rawBid[winner.Bid.Provider])
		ex.Awards = append(ex.Awards, out)
		tried++
		if lease != nil {
			if req.Group != nil {
				req.Group.Hold(req.JobID, lease.Provider) // before the next sibling enters
			}
			res.Lease, res.Raw = lease, raw
			return res, nil
		}
		lostRace = lostRace || out.Raced
		raced = raced && (out.Raced || out.Refused == "" && out.Error != "")
		ranked = dropProvider(ranked, winner.Bid.Provider)
	}
	ex.Winner, ex.ClearingPrice, ex.Rule, ex.Clearing, ex.SecondScore = "", 0, "", nil, 0
	if tried == 0 {
		a.release(ctx, req.JobID, nonce, outcomes, "")
	} else {
		a.releaseFirstAwarded(ctx, req.JobID, nonce, ex.Awards)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, &NoMatchError{Considered: len(book), Excluded: left, Feasible: len(ok),
		Raced: raced && (lostRace || held || unanswered), Held: held && !lostRace, Unanswered: unanswered}
}

// release tells the providers that quoted this round, but won (the
// winner, "" for none), to drop their holds (Releaser), so that the GPUs
// a losing quote named are free for other renters at once. Providers that
// declined hold nothing; those that failed to answer may have held before
// the answer was lost, so they are told too. Best effort: the transport
// returns at once.
func (a *Auctioneer) release(ctx context.Context, jobID string, nonce []byte, outcomes []QuoteOutcome, won string) {
	r, ok := a.transport.(Releaser)
	if !ok {
		return
	}
	for _, q := range outcomes {
		if q.Provider != won && q.Declined == "" {
			_ = r.Release(ctx, q.Provider, jobID, nonce)
		}
	}
}

// releaseFirstAwarded releases the hold of the round's first winner, in a
// round that leased nothing: a refusal or a lost answer may leave one
// behind. Every other bidder was released before that first award.
func (a *Auctioneer) releaseFirstAwarded(ctx context.Context, jobID string, nonce []byte, awards []AwardOutcome) {
	if r, ok := a.transport.(Releaser); ok && len(awards) > 0 {
		_ = r.Release(ctx, awards[0].Provider, jobID, nonce)
	}
}

// eligible filters book in place: not excluded by the request, not a
// sibling's provider, only the pin when one is set, and not convicted. The
// conviction check is a call out of the package per offer, so it runs last.
// excluded counts the offers left out because the request excludes them,
// for the no-match message: "0 offers known" is untrue of a book that held
// the one provider the job left.
func (a *Auctioneer) eligible(book []*auction.Offer, req Request, siblings map[string]bool) (out []*auction.Offer, excluded int) {
	out = book[:0]
	for _, o := range book {
		switch {
		case o != nil && req.Exclude[o.Provider] && (req.Pin == "" || o.Provider == req.Pin):
			excluded++
		case o == nil, req.Pin != "" && o.Provider != req.Pin, siblings[o.Provider], req.Only != nil && !req.Only[o.Provider]:
		case a.trust.Convicted(o.Provider):
		default:
			out = append(out, o)
		}
	}
	return out, excluded
}

// cheapest is the k offers with the lowest floor for tier, in order of
// floor and, on equal floors, of the round's tiebreak (nil: of ok): what
// a stable sort of ok by floor and key would put first, without sorting
// all of ok.
func cheapest(ok []*auction.Offer, tier auction.Tier, k int, tiebreak func(string) uint64) []*auction.Offer {
	top := make([]*auction.Offer, 0, k+1)
	// before: a is asked before b, by floor and then by the round's draw.
	before := func(a, b *auction.Offer, fa auction.Credits) bool {
		fb := b.Prices.Of(tier)
		if fa != fb || tiebreak == nil {
			return fa < fb
		}
		return tiebreak(a.Provider) < tiebreak(b.Provider)
	}
	for _, o := range ok {
		f := o.Prices.Of(tier)
		if len(top) == k && !before(o, top[k-1], f) {
			continue
		}
		i := len(top)
		for i > 0 && before(o, top[i-1], f) {
			i--
		}
		top = slices.Insert(top, i, o)
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}

// filterLastResort is the bids of rs whose providers are (want true) or
// are not (want false) in last, in their order.
func filterLastResort(rs []auction.Ranked, last map[string]bool, want bool) []auction.Ranked {
	if len(last) == 0 {
		if want {
			return nil
		}
		return rs
	}
	out := make([]auction.Ranked, 0, len(rs))
	for _, r := range rs {
		if last[r.Bid.Provider] == want {
			out = append(out, r)
		}
	}
	return out
}

func dropProvider(rs []auction.Ranked, p string) []auction.Ranked {
	out := rs[:0:0]
	for _, r := range rs {
		if r.Bid.Provider != p {
			out = append(out, r)
		}
	}
	return out
}

// preferUndisturbed narrows the feasible offers to those where the job
// would take no other job's GPUs and keep its own to its end
// (auction.Undisturbed), when there are any; with none, every feasible
// offer stays: a bronze job takes the risk of preemption (where its GPUs
// are free now: freeNow), and a silver one the bronze job's place,
// rather than wait. Decided from the offers
// alone, before any quote, so the candidates asked are those first. It
// also returns how many were undisturbed, for Explain.
func preferUndisturbed(ok []*auction.Offer, spec *auction.JobSpec, now time.Time, k int) ([]*auction.Offer, int) {
	calm := make([]*auction.Offer, 0, len(ok))
	for _, o := range ok {
		if auction.Undisturbed(o, spec, now) {
			calm = append(calm, o)
		}
	}
	if len(calm) == 0 && spec.Tier == auction.Bronze {
		return freeNow(ok, spec, now), 0
	}
	if len(calm) == 0 {
		return ok, 0
	}
	return tightest(calm, spec, now, k), len(calm)
}

// freeNow is the offers with the job's GPUs free now, less what bronze
// jobs hold (auction.FreeNow): bronze preempts no one, so a provider
// whose only free GPUs (for feasibility) run bronze jobs declines it as
// fully utilised. Feasibility admits them, since a provider checks its
// own offer, which may still show a bronze job that has ended; the
// renter asks them no more, as its own view (OwnView) corrects the
// offers of its own jobs' ends. Asking them cost a round of five
// declines and a re-auction's wait for most bronze jobs at 1,000
// providers (issue 33).
func freeNow(ok []*auction.Offer, spec *auction.JobSpec, now time.Time) []*auction.Offer {
	out := ok[:0:0]
	for _, o := range ok {
		if auction.FreeNow(o, now) >= spec.Resources.GPUs {
			out = append(out, o)
		}
	}
	return out
}

// tightest is best fit among offers that all leave the job undisturbed:
// those the job fills most closely, leaving the fewest GPUs free now, so
// that a machine with many free GPUs stays whole for a job that needs
// them (a central scheduler's best fit, decided by each renter from the
// offers alone). It keeps at least k offers (the candidates a round asks)
// where there are that many, widening to the next-tightest fits, so that
// a round whose first choices decline or race still has others to award
// and the second-score rule a runner-up: asking only the tightest two
// left jobs waiting for the next round (0.966 of central-online's fill on
// the Alibaba 2025 trace, against 0.986 with k).
func tightest(calm []*auction.Offer, spec *auction.JobSpec, now time.Time, k int) []*auction.Offer {
	// Each offer beside its spare GPUs, computed once: a sort comparing
	// through a map cost more than the feasibility checks at 10,000
	// providers (issue 33).
	type fit struct {
		o     *auction.Offer
		spare int
	}
	byFit := make([]fit, len(calm))
	for i, o := range calm {
		byFit[i] = fit{o, auction.FreeNow(o, now) - spec.Resources.GPUs}
	}
	slices.SortStableFunc(byFit, func(a, b fit) int { return cmp.Compare(a.spare, b.spare) })
	n := 1
	for n < len(byFit) && (n < k || byFit[n].spare == byFit[n-1].spare) {
		n++
	}
	out := make([]*auction.Offer, n)
	for i := range out {
		out[i] = byFit[i].o
	}
	return out
}
