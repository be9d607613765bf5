package auction

import "math"

// Clear runs the second-score rule over ranked bids (Rank's output, scored
// against the same maxPrice, the spec's max_price). The winner is the best
// bid; it is paid the price at which its score would tie the runner-up's,
// never above maxPrice and never below its own bid. With one bid it is
// paid its bid. ok is false when there is nothing to award.
//
// Why this price: a provider's score is
//
//	S(p) = WeightPrice * (1 - p/M) + O
//
// where M is max_price and O = WeightReputation*rep + WeightRTT*rtt +
// WeightLocality*locality does not depend on the price. Only the price
// term moves with p, and linearly, so the winner w (bid p_w, score S_w,
// other parts O_w) ties the runner-up's score S_r at the unique p* with
//
//	WeightPrice * (1 - p*/M) + O_w = S_r
//	p* = M * (1 - (S_r - O_w) / WeightPrice)
//	   = p_w + M * (S_w - S_r) / WeightPrice      (since S_w = WeightPrice*(1 - p_w/M) + O_w)
//
// S_w >= S_r, so p* >= p_w: the winner is paid its bid plus its lead over
// the runner-up, converted from score into credits. What the winner is paid
// therefore does not depend on its own bid as long as it wins, so asking
// its true floor is its best strategy (Che's second-score auction, the
// multi-attribute Vickrey rule). p* is clamped to [p_w, M]: the renter
// never pays above its maximum, even when the winner's lead comes from
// reputation or locality rather than price. p* is rounded down to whole
// millionths, so that the winner's score at the price paid is never below
// the runner-up's (ties go to the winner, who already ranked first).
func Clear(ranked []Ranked, maxPrice Credits) (winner Ranked, price Credits, ok bool) {
	if len(ranked) == 0 || maxPrice <= 0 {
		return Ranked{}, 0, false
	}
	// Find the best two rather than trusting the order, so that Clear is
	// correct on any slice of Ranked, not only Rank's sorted one.
	w, r := 0, -1
	for i := 1; i < len(ranked); i++ {
		switch {
		case better(&ranked[i], &ranked[w]):
			w, r = i, w
		case r < 0 || better(&ranked[i], &ranked[r]):
			r = i
		}
	}
	winner = ranked[w]
	bid := winner.Bid.Price
	if bid <= 0 || bid > maxPrice {
		return Ranked{}, 0, false
	}
	if r < 0 {
		return winner, bid, true
	}
	return winner, tiePrice(winner, ranked[r].Score, maxPrice), true
}

// tiePrice is p* above, clamped to [winner's bid, maxPrice].
func tiePrice(w Ranked, runnerUp float64, maxPrice Credits) Credits {
	bid := w.Bid.Price
	lead := w.Score - runnerUp
	p := float64(bid) + float64(maxPrice)*lead/WeightPrice
	if math.IsNaN(p) || p <= float64(bid) {
		return bid
	}
	if p >= float64(maxPrice) {
		return maxPrice
	}
	// The 1e-3 absorbs float noise (a lead of 0.05 computed as
	// 0.04999999...) that would otherwise cost the winner a millionth.
	return Credits(math.Floor(p + 1e-3))
}

// ScoreAt is the score r would have at price (its other parts unchanged),
// for explaining a clearing price and for checking it.
func ScoreAt(r Ranked, price, maxPrice Credits) float64 {
	p := r.Parts
	p.Price = priceScore(price, maxPrice)
	return p.Score()
}
