package auction

import (
	"math"
	"time"
)

// BidEngine is the provider's side of an auction: it decides from its own
// offer whether to bid on a job and at what price. The zero value bids the
// tier floor, valid for DefaultBidValidity.
type BidEngine struct {
	// Surge and Peak are the engine's own surge rule, for offers without
	// Pricing (callers that predate it); an offer's Pricing replaces both.
	//
	// Surge raises the price with utilisation inside peak windows:
	//
	//	price = floor * (1 + Surge * max(0, util-0.5) * 2)
	//
	// so nothing changes up to half utilisation and the floor is multiplied
	// by 1+Surge when fully busy. Scarce idle capacity at peak is worth
	// more to the owner (it is what their own work competes for), and
	// below half utilisation there is plenty to sell. Surge is clamped to
	// [0, MaxSurge]; 0 disables surge pricing.
	Surge float64
	// Peak is when surge applies, in the owner's zone; nil means never. A
	// calendar without rules is always available, hence always peak.
	Peak *Calendar
	// Validity is how long a bid stands; 0 means DefaultBidValidity.
	Validity time.Duration
	// Hash names a spec (nil: SpecHash). The market simulator passes a
	// memo of it, for the specs its own memo parsed.
	Hash func(*JobSpec) ([]byte, error)
}

// Bid engine limits.
const (
	// MaxSurge caps Surge, so a typo cannot price the provider out of the
	// market by orders of magnitude: at most 4 times the floor.
	MaxSurge = 3.0
	// DefaultBidValidity outlasts an auction round (quotes, ranking,
	// award) with room for a slow network.
	DefaultBidValidity = 2 * time.Minute
	// ReasonBusy: no idle GPU to start a silver or bronze job on now.
	ReasonBusy = "fully utilised"
	// ReasonHeld: the GPUs a job needs are free but promised to other
	// jobs' live quotes (auction/provider's quote holds). It is part of
	// the wire contract, matched exactly: the renter asks again shortly,
	// as after a lost race, rather than taking the provider for full.
	ReasonHeld = "every free GPU is promised to a live quote; ask again shortly"
	// ReasonBadSpec: the spec cannot be named by its hash.
	ReasonBadSpec = "the job spec cannot be encoded"
)

// Quote answers a request for quotes with a bid or a decline. It applies
// the renter's own feasibility checks to this one offer (the owner's tiers,
// floors, calendar, policy and limits; not RTT, which only the renter
// measures), so a provider declines exactly what the renter would reject.
// util is the current utilisation of the offer's GPUs, 0..1; at 1 nothing
// can start now, so only gold, which starts later, is still quoted.
//
// The bid's Provider, Tier, GPUs, Price, ValidUntil, SpecHash and terms
// (Start, DurationSec, NoticeSec) are set; the caller
// sets JobID and Nonce from the request it answers and signs the bid
// (SignBid).
//
// The price starts from the floor in force (Offer.FloorFor) for the job
// at its start (gold: spec.Start; others: now) over duration.max: the
// highest period rate the job meets, the very rule the renter's price
// check applies. The offer's Pricing then surges it with util, up to the
// owner's cap (Pricing.Surge); an offer without Pricing uses the engine's
// Surge and Peak. The price is never below the floor in force and never
// above the spec's max_price: surge is capped there rather than
// declining, since winning at max_price still pays at least the floor.
func (e *BidEngine) Quote(spec *JobSpec, offer *Offer, util float64, now time.Time) (Bid, *Decline) {
	if offer == nil { // nothing to sell, as after a withdrawal
		return Bid{}, &Decline{Reason: ReasonWithdrawn}
	}
	decline := func(reason string) (Bid, *Decline) {
		return Bid{}, &Decline{Provider: offer.Provider, Reason: reason}
	}
	var rejected []Rejection
	it := newFeasibilityStack(spec, Env{Now: now}, &sliceIterator{offers: []*Offer{offer}}, &rejected)
	if it.Next() == nil {
		return decline(rejected[0].Reason)
	}
	if math.IsNaN(util) {
		util = 1 // unknown load: assume busy rather than under-price
	}
	util = min(1, max(0, util))
	if util >= 1 && spec.Tier != Gold {
		return decline(ReasonBusy)
	}
	start := now
	if spec.Tier == Gold {
		start = spec.Start
	}
	floor := offer.FloorFor(spec.Tier, start, spec.Duration.Max)
	price := floor
	switch {
	case offer.Pricing != nil:
		price = offer.Pricing.Surge(floor, util)
	case e.inPeak(start):
		price = surgePrice(floor, e.Surge, util)
	}
	price = min(price, spec.MaxPrice) // the checks ensured floor <= MaxPrice
	validity := e.Validity
	if validity <= 0 {
		validity = DefaultBidValidity
	}
	specHash := e.Hash
	if specHash == nil {
		specHash = SpecHash
	}
	hash, err := specHash(spec)
	if err != nil {
		return decline(ReasonBadSpec)
	}
	return Bid{
		Provider:    offer.Provider,
		Tier:        spec.Tier,
		Price:       price,
		GPUs:        spec.Resources.GPUs,
		ValidUntil:  now.Add(validity).Unix(),
		SpecHash:    hash,
		Start:       start.Unix(),
		DurationSec: int64(spec.Duration.Max / time.Second),
		NoticeSec:   offer.Policy.PreemptNotice,
	}, nil
}

// surgePrice applies the Surge rule, rounding up to whole millionths so
// that a surge never rounds below the floor.
func surgePrice(floor Credits, surge, util float64) Credits {
	if math.IsNaN(surge) {
		surge = 0
	}
	surge = min(MaxSurge, max(0, surge))
	mult := 1 + surge*max(0, util-0.5)*2
	return max(floor, Credits(math.Ceil(float64(floor)*mult)))
}

// inPeak reports whether t lies in a peak window. An invalid calendar
// counts as no peak: the owner's mistake should not raise renters' prices.
func (e *BidEngine) inPeak(t time.Time) bool {
	if e.Peak == nil || e.Surge <= 0 {
		return false
	}
	ws, err := e.Peak.Windows(t, t.Add(time.Second))
	return err == nil && len(ws) > 0
}
