package auction

import (
	"encoding/binary"
	"testing"
)

// TestTiedBidsClearToEachProviderInTurn: four providers bid the same
// price with the same quality. Without a tiebreak the lowest ID wins
// every round (every renter herds onto it); with each round's draw every
// provider wins some rounds, each is paid its bid, and the same draw
// always picks the same winner.
func TestTiedBidsClearToEachProviderInTurn(t *testing.T) {
	spec, bids, offers := rankFixture(4)
	for i := range bids {
		bids[i].Price = 1_000_000
	}
	env := Env{Now: t0}
	w, _, _ := Clear(Rank(spec, bids, offers, env), spec.MaxPrice)
	for range 20 {
		if again, _, _ := Clear(Rank(spec, bids, offers, env), spec.MaxPrice); again.Bid.Provider != w.Bid.Provider {
			t.Fatalf("without a tiebreak the winner changed: %s, then %s", w.Bid.Provider, again.Bid.Provider)
		}
	}
	wins := map[string]int{}
	for round := range uint64(400) {
		env.Tiebreak = TiebreakOf(binary.BigEndian.AppendUint64(nil, round))
		w, price, ok := Clear(Rank(spec, bids, offers, env), spec.MaxPrice)
		if !ok || price != w.Bid.Price {
			t.Fatalf("round %d: ok %v, paid %d for a bid of %d among equal bids", round, ok, price, w.Bid.Price)
		}
		if again, _, _ := Clear(Rank(spec, bids, offers, env), spec.MaxPrice); again.Bid.Provider != w.Bid.Provider {
			t.Fatalf("round %d: the same draw picked %s, then %s", round, w.Bid.Provider, again.Bid.Provider)
		}
		wins[w.Bid.Provider]++
	}
	for _, b := range bids {
		if n := wins[b.Provider]; n < 60 { // 100 each when fair
			t.Errorf("%s won %d of 400 tied rounds: %v", b.Provider, n, wins)
		}
	}
}

// TestTiebreakNeverOverridesPrice: a cheaper bid wins whatever the draw.
func TestTiebreakNeverOverridesPrice(t *testing.T) {
	spec, bids, offers := rankFixture(3)
	bids[0].Price, bids[1].Price, bids[2].Price = 1_000_001, 1_000_000, 1_000_001
	for round := range uint64(200) {
		env := Env{Now: t0, Tiebreak: TiebreakOf(binary.BigEndian.AppendUint64(nil, round))}
		w, price, _ := Clear(Rank(spec, bids, offers, env), spec.MaxPrice)
		if w.Bid.Provider != bids[1].Provider || price != 1_000_001 {
			t.Fatalf("round %d: %s won at %d; want %s at the runner-up's 1000001", round, w.Bid.Provider, price, bids[1].Provider)
		}
	}
}
