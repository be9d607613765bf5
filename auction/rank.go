package auction

import (
	"cmp"
	"slices"
	"time"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Score weights. Price dominates because it is what the renter states a
// limit for; reputation next, because a cheap provider that fails costs a
// re-auction; RTT and data locality break near-ties. They sum to 1, so a
// score is in [0, 1]. Changing them changes who wins, and Clear's tie price
// depends on WeightPrice (see clear.go).
const (
	WeightPrice      = 0.50
	WeightReputation = 0.25
	WeightRTT        = 0.15
	WeightLocality   = 0.10
	// RTTScale is the RTT that scores 0 when the spec sets no max_rtt_ms
	// (with one, max_rtt_ms is the scale).
	RTTScale = 250 * time.Millisecond
)

// ScoreParts are a bid's normalised criteria, each in [0, 1], higher
// better. Score = WeightPrice*Price + WeightReputation*Reputation +
// WeightRTT*RTT + WeightLocality*Locality.
type ScoreParts struct {
	// Price is 1 - price/max_price: linear in price, which is what lets
	// Clear solve for the tie price exactly.
	Price      float64 `json:"price"`
	Reputation float64 `json:"reputation"`
	RTT        float64 `json:"rtt"`      // 1 - rtt/scale, floored at 0; 0 when unmeasured
	Locality   float64 `json:"locality"` // fraction of spec datasets cached; 1 when the spec has none
}

// Score weighs the parts.
func (p ScoreParts) Score() float64 {
	return WeightPrice*p.Price + WeightReputation*p.Reputation + WeightRTT*p.RTT + WeightLocality*p.Locality
}

// Ranked is a scored bid with everything `job explain` shows about it.
type Ranked struct {
	Bid      Bid           `json:"bid"`
	Offer    *Offer        `json:"-"`
	Score    float64       `json:"score"`
	Parts    ScoreParts    `json:"parts"`
	RTT      time.Duration `json:"rtt"`
	RTTKnown bool          `json:"rtt_known"`
}

// priceScore is the price part; see ScoreParts.Price.
func priceScore(price, maxPrice Credits) float64 {
	return 1 - float64(price)/float64(maxPrice)
}

// better orders ranked bids: higher score, then lower price, then provider
// ID, so that ranking and clearing are deterministic on ties.
func better(a, b *Ranked) bool { return compareRanked(a, b) < 0 }

func compareRanked(a, b *Ranked) int {
	if a.Score != b.Score {
		if a.Score > b.Score {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Bid.Price, b.Bid.Price); c != 0 {
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
			rejected = append(rejected, Rejection{b.Provider, CheckBid, reason})
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
				rejected = append(rejected, Rejection{o.Provider, CheckRTT, ReasonRTTUnknown})
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
// the others were left out) and returns them best first. offers maps each
// bidder to its current offer, which supplies the datasets it caches.
func Rank(spec *JobSpec, bids []Bid, offers map[string]*Offer, env Env) []Ranked {
	admitted, _ := AdmitBids(spec, bids, offers, env)
	scale := RTTScale
	if spec.Placement.MaxRTT > 0 {
		scale = spec.Placement.MaxRTT
	}
	want := datasetSpellings(spec.Datasets)
	out := make([]Ranked, 0, len(admitted))
	for _, b := range admitted {
		o := offers[b.Provider]
		r := Ranked{Bid: b, Offer: o}
		r.RTT, r.RTTKnown = rttOf(env, b.Provider)
		r.Parts = ScoreParts{
			Price:      priceScore(b.Price, spec.MaxPrice),
			Reputation: reputationOf(env.Reputation, b.Provider),
			Locality:   locality(want, o.Datasets),
		}
		if r.RTTKnown {
			r.Parts.RTT = max(0, 1-float64(r.RTT)/float64(scale))
		}
		r.Score = r.Parts.Score()
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
