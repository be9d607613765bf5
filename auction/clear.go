package auction

// Clear clears ranked bids (Rank's output, scored against the same
// maxPrice, the spec's max_price) at the quality-adjusted second price.
// The winner is the bid with the lowest Effective price (bid less quality
// credit; ties as Better); it is paid
//
//	pay = runner-up's Effective + winner's credit
//	    = runner-up's bid - runner-up's credit + winner's credit
//
// clamped to [winner's bid, maxPrice]. With one bid it is paid its bid. ok
// is false when there is nothing to award.
//
// The bounds: credits are within [0, QualityCap(maxPrice)], so
//
//	winner's bid <= pay <= min(maxPrice, runner-up's bid + QualityCap)
//
// (the lower clamp never binds while the winner wins: its Effective is at
// most the runner-up's). The renter pays the next provider's ask, plus a
// premium for better reputation, RTT and locality that is at most a fifth
// of its max_price, and never above max_price. A provider without history
// pays for that only in its credit, never more than QualityCap.
//
// Why it is truthful: a bid's credit does not depend on its price, so a
// winner's pay, min(maxPrice, runner-up's Effective + own credit), does
// not depend on its own bid at all. Bidding above its true floor can only
// lose an auction it would have won at a profit; bidding below can only
// win one whose pay is below its floor. So asking the true floor is every
// provider's best strategy (Vickrey's rule on quality-adjusted prices,
// the multi-attribute second price). Everything is integer Credits: the
// only float step is turning normalised parts into credits
// (ScoreParts.Credit), which rounds down within each part's share.
func Clear(ranked []Ranked, maxPrice Credits) (winner Ranked, price Credits, ok bool) {
	if len(ranked) == 0 || maxPrice <= 0 {
		return Ranked{}, 0, false
	}
	// Find the best two rather than trusting the order, so that Clear is
	// correct on any slice of Ranked, not only Rank's sorted one.
	w, r := 0, -1
	for i := 1; i < len(ranked); i++ {
		switch {
		case Better(&ranked[i], &ranked[w]):
			w, r = i, w
		case r < 0 || Better(&ranked[i], &ranked[r]):
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
	return winner, SecondPrice(winner, ranked[r], maxPrice), true
}

// SecondPrice is what winner is paid against runnerUp: runnerUp's
// Effective plus winner's credit, clamped to [winner's bid, maxPrice].
func SecondPrice(winner, runnerUp Ranked, maxPrice Credits) Credits {
	p := runnerUp.Effective + winner.Credit.Total()
	return max(winner.Bid.Price, min(p, maxPrice))
}
