package auction

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Quality in money. A bid ranks by its quality-adjusted price, Effective =
// price - quality credit, lowest first, and Clear pays the winner the
// runner-up's Effective plus its own credit (see clear.go). The credit is
// what reputation, RTT and data locality are worth to the renter, in
// Credits, and it is bounded: at most QualitySharePercent of the spec's
// max_price (QualityCap), split among the criteria in the percentages
// below. So a better provider can earn a premium over the runner-up's ask,
// but never more than QualityCap, whatever its reputation.
//
// Why 20% of max_price: the cap must not depend on any bid, or a bidder
// could move its own credit (and truthfulness fails); max_price is the
// only money the renter states before bidding. A fifth is large enough
// that a proven provider beats an unproven one asking up to a tenth of
// max_price less (reputation's half of the cap), and small enough that
// the renter never pays more than a fifth of its maximum above what the
// next provider asked.
const (
	QualitySharePercent = 20
	// How QualityCap splits, in percent of it; locality gets the rest
	// (LocalityPercent), so that the three parts sum to the cap exactly.
	// Reputation counts most, because a cheap provider that fails costs a
	// re-auction; RTT and locality break near-ties.
	ReputationPercent = 50
	RTTPercent        = 30
	LocalityPercent   = 100 - ReputationPercent - RTTPercent
	// RTTScale is the RTT that scores 0 when the spec sets no max_rtt_ms
	// (with one, max_rtt_ms is the scale).
	RTTScale = 250 * time.Millisecond
)

// QualityCap is the most quality credit a bid can have against maxPrice:
// QualitySharePercent of it, rounded down.
func QualityCap(maxPrice Credits) Credits { return percentOf(maxPrice, QualitySharePercent) }

// percentOf is pct% of c rounded down, without overflowing for any c >= 0.
func percentOf(c Credits, pct int64) Credits { return c/100*Credits(pct) + c%100*Credits(pct)/100 }

// ScoreParts are a bid's normalised criteria, each in [0, 1], higher
// better. Only Reputation, RTT and Locality make up its quality (Score,
// QualityCredit); Price is shown for comparison.
type ScoreParts struct {
	Price      float64 `json:"price"` // 1 - price/max_price
	Reputation float64 `json:"reputation"`
	RTT        float64 `json:"rtt"`      // 1 - rtt/scale, floored at 0; 0 when unmeasured
	Locality   float64 `json:"locality"` // fraction of spec datasets cached; 1 when the spec has none
}

// Score is the quality in [0, 1]: the parts weighted by ReputationPercent,
// RTTPercent and LocalityPercent. The credit a bid gets is about
// Score * QualityCap (exactly: QualityCredit, rounded per part).
func (p ScoreParts) Score() float64 {
	return (ReputationPercent*p.Reputation + RTTPercent*p.RTT + LocalityPercent*p.Locality) / 100
}

// QualityCredit is a bid's quality in Credits: each part's normalised
// value times its share of QualityCap, rounded down. Each part is within
// [0, its share], so Total is within [0, QualityCap].
type QualityCredit struct {
	Reputation Credits `json:"reputation" doc:"micro-credits per GPU-hour its reputation is worth"`
	RTT        Credits `json:"rtt" doc:"micro-credits per GPU-hour its round trip is worth"`
	Locality   Credits `json:"locality" doc:"micro-credits per GPU-hour its cached datasets are worth"`
}

// Total is the whole credit.
func (c QualityCredit) Total() Credits { return c.Reputation + c.RTT + c.Locality }

// Credit is the quality credit of parts against maxPrice.
func (p ScoreParts) Credit(maxPrice Credits) QualityCredit {
	total := QualityCap(max(maxPrice, 0))
	rep, rtt := percentOf(total, ReputationPercent), percentOf(total, RTTPercent)
	return QualityCredit{
		Reputation: partCredit(rep, p.Reputation),
		RTT:        partCredit(rtt, p.RTT),
		Locality:   partCredit(total-rep-rtt, p.Locality),
	}
}

// partCredit is part (in [0, 1]) of c, rounded down to whole Credits and
// kept within [0, c]: the float product is the only inexact step, and the
// bound holds whatever it rounds to. The 1e-6 absorbs float noise (0.29 x
// 100 computed as 28.999999999999996) that would cost a Credit.
func partCredit(c Credits, part float64) Credits {
	switch {
	case c <= 0 || !(part > 0): // NaN scores nothing
		return 0
	case part >= 1:
		return c
	}
	return min(c, max(0, Credits(math.Floor(float64(c)*part+1e-6))))
}

// Ranked is a scored bid with everything `job explain` shows about it:
// why it ranked where it did, in Credits.
type Ranked struct {
	Bid   Bid    `json:"bid"`
	Offer *Offer `json:"-"`
	// Effective is what ranks, lowest first: Bid.Price - Credit.Total().
	Effective Credits       `json:"effective" doc:"the quality-adjusted price that ranks: the bid less its quality credit, micro-credits per GPU-hour"`
	Credit    QualityCredit `json:"credit"`
	Score     float64       `json:"score"` // Parts.Score(): the quality, in [0, 1]
	Parts     ScoreParts    `json:"parts"`
	RTT       time.Duration `json:"rtt"`
	RTTKnown  bool          `json:"rtt_known"`
	// RTTSource says where RTT came from, for `job explain`: the
	// auctioneer sets it (auction/renter: "measured" in this round's quote
	// exchange, "peerstore" for the node's earlier measurements); Rank,
	// which sees only Env.RTT, leaves it empty.
	RTTSource string `json:"rtt_source,omitempty"`
	// Tiebreak orders bids equal in Effective and price (Env.Tiebreak):
	// drawn per renter and per round, so that concurrent renters facing
	// the same equal bids do not all award the same provider.
	Tiebreak uint64 `json:"-"`
}

// ScoreBid is the Ranked of bid b with parts against maxPrice (the spec's
// max_price), as Rank scores it: Parts.Price from the bid, the quality
// credit from the other parts. The credit does not depend on the price,
// which is what makes Clear truthful.
func ScoreBid(b Bid, parts ScoreParts, maxPrice Credits) Ranked {
	r := Ranked{Bid: b, Parts: parts}
	r.Parts.Price = priceScore(b.Price, maxPrice)
	r.Score = r.Parts.Score()
	r.Credit = r.Parts.Credit(maxPrice)
	r.Effective = b.Price - r.Credit.Total()
	return r
}

// priceScore is the price part; see ScoreParts.Price.
func priceScore(price, maxPrice Credits) float64 {
	if maxPrice <= 0 {
		return 0
	}
	return 1 - float64(price)/float64(maxPrice)
}

// Better orders ranked bids: lower Effective, then lower price (the
// renter pays less for the same quality-adjusted price), then the round's
// Tiebreak, then provider ID, so that ranking and clearing are
// deterministic on ties for a given round and yet differ between rounds
// and renters. Neither tiebreak depends on a bid, so Clear stays truthful.
func Better(a, b *Ranked) bool { return compareRanked(a, b) < 0 }

func compareRanked(a, b *Ranked) int {
	if c := cmp.Compare(a.Effective, b.Effective); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Bid.Price, b.Bid.Price); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Tiebreak, b.Tiebreak); c != 0 {
		return c
	}
	return cmp.Compare(a.Bid.Provider, b.Bid.Provider)
}

// Bid admission checks and reasons, recorded like feasibility rejections.
const (
	CheckBid = "bid"

	ReasonBidExpired   = "bid expired"
	ReasonBidDuplicate = "provider already bid"
	ReasonBidTier      = "bid is for another tier"
	ReasonBidGPUs      = "bid is for another GPU count"
	ReasonBidAboveMax  = "bid above max_price"
	ReasonBidNoOffer   = "no offer from the bidder"
	ReasonRTTUnknown   = "RTT unmeasured and placement.max_rtt_ms is set"
)

// AdmitBids keeps the bids that may win: the bid matches the spec (tier,
// GPU count, price within max_price, still valid, one per provider), the
// bidder's current offer still passes every feasibility check, and, when
// the spec sets max_rtt_ms, the RTT has been measured and is within it
// (the strict half of the RTT rule; see matcher.rtt). The caller passes
// only authentic bids for this job and round (DecodeSignedBid, JobID,
// Nonce).
func AdmitBids(spec *JobSpec, bids []Bid, offers map[string]*Offer, env Env) (ok []Bid, rejected []Rejection) {
	seen := make(map[string]bool, len(bids))
	cands := make([]*Offer, 0, len(bids))
	candBids := make([]Bid, 0, len(bids)) // candBids[i] is the bid on cands[i]
	now := env.Now.Unix()
	for _, b := range bids {
		reason := ""
		o := offers[b.Provider]
		switch {
		case seen[b.Provider]:
			reason = ReasonBidDuplicate
		case now >= b.ValidUntil:
			reason = ReasonBidExpired
		case b.Tier != spec.Tier:
			reason = ReasonBidTier
		case b.GPUs != spec.Resources.GPUs:
			reason = ReasonBidGPUs
		case b.Price <= 0 || b.Price > spec.MaxPrice:
			reason = ReasonBidAboveMax
		case o == nil || o.Provider != b.Provider:
			reason = ReasonBidNoOffer
		}
		seen[b.Provider] = true
		if reason != "" {
			rejected = append(rejected, Rejection{Provider: b.Provider, Check: CheckBid, Reason: reason})
			continue
		}
		cands, candBids = append(cands, o), append(candBids, b)
	}
	it := newFeasibilityStack(spec, env, &sliceIterator{offers: cands}, &rejected)
	j := 0 // the stack yields a subsequence of cands, in order
	for o := it.Next(); o != nil; o = it.Next() {
		for cands[j] != o {
			j++
		}
		if spec.Placement.MaxRTT > 0 {
			if _, known := rttOf(env, o.Provider); !known {
				rejected = append(rejected, Rejection{Provider: o.Provider, Check: CheckRTT, Reason: ReasonRTTUnknown})
				continue
			}
		}
		ok = append(ok, candBids[j])
	}
	return ok, rejected
}

func rttOf(env Env, provider string) (time.Duration, bool) {
	if env.RTT == nil {
		return 0, false
	}
	return env.RTT(provider)
}

// Rank scores the admissible bids (AdmitBids; call it directly to learn why
// the others were left out) and returns them best first: lowest Effective
// price, as Better orders them. offers maps each
// bidder to its current offer, which supplies the datasets it caches.
func Rank(spec *JobSpec, bids []Bid, offers map[string]*Offer, env Env) []Ranked {
	admitted, _ := AdmitBids(spec, bids, offers, env)
	scale := RTTScale
	if spec.Placement.MaxRTT > 0 {
		scale = spec.Placement.MaxRTT
	}
	want := datasetSpellings(spec.dataCIDs())
	out := make([]Ranked, 0, len(admitted))
	for _, b := range admitted {
		o := offers[b.Provider]
		rtt, known := rttOf(env, b.Provider)
		parts := ScoreParts{
			Reputation: reputationOf(env.Reputation, b.Provider),
			Locality:   locality(want, o.Datasets),
		}
		if known {
			parts.RTT = max(0, 1-float64(rtt)/float64(scale))
		}
		r := ScoreBid(b, parts, spec.MaxPrice)
		r.Offer, r.RTT, r.RTTKnown = o, rtt, known
		if env.Tiebreak != nil {
			r.Tiebreak = env.Tiebreak(b.Provider)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Ranked) int { return compareRanked(&a, &b) })
	return out
}

// datasetSpellings lists, per spec dataset, the spellings offers use for
// it: base32 CIDv1 and, for dag-pb sha2-256 roots, the Qm... CIDv0. Offers
// are then matched by string comparison, without decoding each bidder's
// CIDs; a CID in another base merely misses the locality bonus.
func datasetSpellings(ds []string) [][]string {
	out := make([][]string, 0, len(ds))
	for _, d := range ds {
		c, err := cid.Decode(d)
		if err != nil {
			continue // ParseJobSpec admits only CIDs
		}
		sp := []string{d, cid.NewCidV1(c.Type(), c.Hash()).String()}
		if dec, err := mh.Decode(c.Hash()); err == nil && c.Type() == cid.DagProtobuf && dec.Code == mh.SHA2_256 && dec.Length == 32 {
			sp = append(sp, cid.NewCidV0(c.Hash()).String())
		}
		out = append(out, sp)
	}
	return out
}

// locality is the fraction of wanted datasets the offer caches. A spec
// without datasets has nothing to fetch, so every offer is fully local.
func locality(want [][]string, cached []string) float64 {
	if len(want) == 0 {
		return 1
	}
	hits := 0
	for _, sp := range want {
		for _, c := range cached {
			if contains(sp, c) {
				hits++
				break
			}
		}
	}
	return float64(hits) / float64(len(want))
}
