package renter

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// TestClearingStaysWithinBidAndMax: over random markets (floors, surge,
// reputation, measured and unmeasured round trips, the renter's maximum),
// a lease is always with the best-ranked bidder, at a price no lower than
// its bid and no higher than max_price; a round leases nothing only when
// no floor is within max_price.
func TestClearingStaysWithinBidAndMax(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	leased, atBid, atMax := 0, 0, 0
	for iter := range 300 {
		n := 1 + r.IntN(DefaultCandidates) // all of them are asked, so "no match" can be checked exactly
		floors := make([]auction.Credits, n)
		for i := range floors {
			floors[i] = auction.Credits(100_000 * (1 + r.IntN(30)))
		}
		m := newMarket(t, newManualClock(t0), 4, floors...)
		for _, p := range m.providers {
			p.engine.Surge = r.Float64() * auction.MaxSurge // with a busy provider, bids rise above the floor
			for range r.IntN(4) {
				p.used[p.gpus[r.IntN(len(p.gpus))]] = "busy"
			}
			m.trust.rep[p.id] = r.Float64()
			if r.IntN(3) > 0 {
				m.trust.rtt[p.id] = time.Duration(1+r.IntN(300)) * time.Millisecond
			}
		}
		spec := testSpec()
		spec.MaxPrice = auction.Credits(100_000 * (1 + r.IntN(30)))
		res, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-1", spec))
		if err != nil {
			if !errors.Is(err, ErrNoMatch) {
				t.Fatalf("iteration %d: %v", iter, err)
			}
			for _, p := range m.providers {
				if _, _, used := p.counts(); p.offer.Prices.Bronze <= spec.MaxPrice && used < len(p.gpus) {
					t.Fatalf("iteration %d: no match although %s has a free GPU at %d <= %d", iter, p.id, p.offer.Prices.Bronze, spec.MaxPrice)
				}
			}
			continue
		}
		leased++
		l, bid, ranked := res.Lease, bidOf(t, res.Lease), res.Explain.Ranked
		if l.Price < bid.Price || l.Price > spec.MaxPrice {
			t.Fatalf("iteration %d: cleared at %d, outside [bid %d, max %d]", iter, l.Price, bid.Price, spec.MaxPrice)
		}
		atBid, atMax = atBid+b2i(l.Price == bid.Price), atMax+b2i(l.Price == spec.MaxPrice)
		if l.Provider != ranked[0].Bid.Provider {
			t.Fatalf("iteration %d: leased to %s, ranked first %s", iter, l.Provider, ranked[0].Bid.Provider)
		}
		if _, want, _ := auction.Clear(ranked, spec.MaxPrice); l.Price != want || res.Explain.ClearingPrice != want {
			t.Fatalf("iteration %d: lease at %d, explain %d, second-score price %d", iter, l.Price, res.Explain.ClearingPrice, want)
		}
	}
	t.Logf("%d of 300 random markets leased: %d at the bid, %d at max_price", leased, atBid, atMax)
	if leased < 100 || atBid == 0 || atMax == 0 || atBid+atMax == leased {
		t.Errorf("the property was hardly exercised: %d leased, %d at the bid, %d at max_price", leased, atBid, atMax)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCheapestIsAStableSortsPrefix: the K candidates are exactly what node
// took before, the first K of the feasible offers stably sorted by floor.
func TestCheapestIsAStableSortsPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		ok := make([]*auction.Offer, r.IntN(40))
		for i := range ok {
			ok[i] = &auction.Offer{Provider: strconv.Itoa(i), Prices: auction.Prices{Bronze: auction.Credits(1 + r.IntN(6))}}
		}
		k := 1 + r.IntN(8)
		want := slices.Clone(ok)
		slices.SortStableFunc(want, func(a, b *auction.Offer) int { return cmp.Compare(a.Prices.Bronze, b.Prices.Bronze) })
		want = want[:min(k, len(want))]
		if got := cheapest(ok, auction.Bronze, k, nil); !slices.Equal(got, want) {
			t.Fatalf("cheapest %d of %d: %v, want %v", k, len(ok), names(got), names(want))
		}
		// With a round's tiebreak: the first K by floor, then by key.
		key := auction.TiebreakOf([]byte{byte(r.IntN(256)), byte(r.IntN(256))})
		want = slices.Clone(ok)
		slices.SortStableFunc(want, func(a, b *auction.Offer) int {
			if c := cmp.Compare(a.Prices.Bronze, b.Prices.Bronze); c != 0 {
				return c
			}
			return cmp.Compare(key(a.Provider), key(b.Provider))
		})
		want = want[:min(k, len(want))]
		if got := cheapest(ok, auction.Bronze, k, key); !slices.Equal(got, want) {
			t.Fatalf("cheapest %d of %d with a tiebreak: %v, want %v", k, len(ok), names(got), names(want))
		}
	}
}

// TestEqualProvidersAreSpreadOverRounds: among equal floors and equal
// bids, rounds with different nonces ask and award different providers,
// and each about as often (herding onto the lowest ID was issue 33's);
// the same nonce always ranks the same way.
func TestEqualProvidersAreSpreadOverRounds(t *testing.T) {
	ok := make([]*auction.Offer, 10)
	for i := range ok {
		ok[i] = &auction.Offer{Provider: "p" + strconv.Itoa(i), Prices: auction.Prices{Bronze: 5}}
	}
	first := map[string]int{}
	r := rand.New(rand.NewPCG(5, 6))
	const rounds = 2000
	for range rounds {
		nonce := binary.LittleEndian.AppendUint64(nil, r.Uint64())
		got := cheapest(ok, auction.Bronze, 3, auction.TiebreakOf(nonce))
		again := cheapest(ok, auction.Bronze, 3, auction.TiebreakOf(nonce))
		if !slices.Equal(got, again) {
			t.Fatalf("the same nonce chose %v, then %v", names(got), names(again))
		}
		first[got[0].Provider]++
	}
	for _, o := range ok {
		// Fair would be 200 each; 120 is far outside chance.
		if n := first[o.Provider]; n < 120 || n > 280 {
			t.Errorf("%s asked first in %d of %d rounds, want about %d: %v", o.Provider, n, rounds, rounds/len(ok), first)
		}
	}
}

func names(os []*auction.Offer) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Provider)
	}
	return out
}
