package auction

import (
	"github.com/ipfs/go-cid"
	"math"
	"math/rand"
	"testing"
	"time"
)

// mapRep is a fake Reputation; providers it does not list score 0.
type mapRep map[string]float64

func (m mapRep) Score(p string) float64 { return m[p] }

// rankFixture is n feasible bronze offers for baseSpec at t0, one bid each.
func rankFixture(n int) (*JobSpec, []Bid, map[string]*Offer) {
	spec := baseSpec()
	spec.MaxPrice = 2_000_000
	offers := map[string]*Offer{}
	var bids []Bid
	for i := 0; i < n; i++ {
		o := validOffer(fakeID(uint64(i)), t0)
		o.Datasets = nil
		offers[o.Provider] = o
		bids = append(bids, Bid{Provider: o.Provider, JobID: "job", Tier: Bronze, Price: o.Prices.Bronze,
			GPUs: 2, ValidUntil: t0.Unix() + 60, Nonce: []byte("12345678")})
	}
	return spec, bids, offers
}

func TestRankScoreParts(t *testing.T) {
	spec, bids, offers := rankFixture(3)
	spec.Datasets = testDatasets[:2]
	spec.Placement.MaxRTT = 100 * time.Millisecond
	a, b, c := bids[0].Provider, bids[1].Provider, bids[2].Provider
	bids[0].Price, bids[1].Price, bids[2].Price = 1_500_000, 1_200_000, 1_200_000
	// b caches the second dataset, spelled as CIDv1 where the spec has
	// CIDv0; c caches both.
	qm, err := cid.Decode(testDatasets[1])
	if err != nil {
		t.Fatal(err)
	}
	offers[b].Datasets = []string{cid.NewCidV1(qm.Type(), qm.Hash()).String()}
	offers[c].Datasets = testDatasets[:2]
	env := Env{Now: t0, RTT: fixedRTT{a: 10 * time.Millisecond, b: 50 * time.Millisecond, c: 50 * time.Millisecond}.rtt,
		Reputation: mapRep{a: 0.9, b: 0.5, c: 0.5}}
	got := Rank(spec, bids, offers, env)
	if len(got) != 3 {
		t.Fatalf("ranked %d", len(got))
	}
	want := map[string]ScoreParts{
		a: {Price: 0.25, Reputation: 0.9, RTT: 0.9, Locality: 0},
		b: {Price: 0.4, Reputation: 0.5, RTT: 0.5, Locality: 0.5},
		c: {Price: 0.4, Reputation: 0.5, RTT: 0.5, Locality: 1},
	}
	for _, r := range got {
		w := want[r.Bid.Provider]
		if d := math.Abs(r.Score - w.Score()); d > 1e-12 || math.Abs(r.Parts.Price-w.Price) > 1e-12 ||
			r.Parts.Reputation != w.Reputation || math.Abs(r.Parts.RTT-w.RTT) > 1e-12 || r.Parts.Locality != w.Locality {
			t.Errorf("%s: parts %+v score %v, want %+v score %v", r.Bid.Provider, r.Parts, r.Score, w, w.Score())
		}
	}
	// a: .125+.225+.135+0 = .485; c: .2+.125+.075+.1 = .5; b: .45
	if got[0].Bid.Provider != c || got[1].Bid.Provider != a || got[2].Bid.Provider != b {
		t.Fatalf("order %s %s %s, want c a b", got[0].Bid.Provider, got[1].Bid.Provider, got[2].Bid.Provider)
	}
}

func TestAdmitBids(t *testing.T) {
	spec, bids, offers := rankFixture(9)
	spec.Placement.MaxRTT = 100 * time.Millisecond
	rtt := fixedRTT{}
	for p := range offers {
		rtt[p] = 20 * time.Millisecond
	}
	want := map[string]string{}
	mut := func(i int, reason string, f func(b *Bid)) {
		f(&bids[i])
		want[bids[i].Provider] = reason
	}
	mut(0, ReasonBidExpired, func(b *Bid) { b.ValidUntil = t0.Unix() })
	mut(1, ReasonBidTier, func(b *Bid) { b.Tier = Silver })
	mut(2, ReasonBidGPUs, func(b *Bid) { b.GPUs = 1 })
	mut(3, ReasonBidAboveMax, func(b *Bid) { b.Price = spec.MaxPrice + 1 })
	mut(4, ReasonBidNoOffer, func(b *Bid) { delete(offers, b.Provider) })
	mut(5, ReasonWithdrawn, func(b *Bid) { offers[b.Provider].Withdrawn = true })
	mut(6, ReasonRTTUnknown, func(b *Bid) { delete(rtt, b.Provider) })
	mut(7, ReasonRTT, func(b *Bid) { rtt[b.Provider] = 101 * time.Millisecond })
	bids = append(bids, bids[8]) // a second bid from the last provider
	ok, rej := AdmitBids(spec, bids, offers, Env{Now: t0, RTT: rtt.rtt})
	if len(ok) != 1 || ok[0].Provider != bids[8].Provider {
		t.Fatalf("admitted %+v", ok)
	}
	if len(rej) != 9 || rej[len(rej)-1].Reason == "" {
		t.Fatalf("rejected %+v", rej)
	}
	for _, r := range rej {
		if r.Provider == bids[8].Provider {
			if r.Reason != ReasonBidDuplicate {
				t.Errorf("duplicate: %+v", r)
			}
			continue
		}
		if want[r.Provider] != r.Reason {
			t.Errorf("%s: got %q, want %q", r.Provider, r.Reason, want[r.Provider])
		}
	}
}

func TestClear(t *testing.T) {
	const max = 2_000_000
	mk := func(provider string, price Credits, rep float64) Ranked {
		r := Ranked{Bid: Bid{Provider: provider, Price: price}, Parts: ScoreParts{Price: priceScore(price, max), Reputation: rep}}
		r.Score = r.Parts.Score()
		return r
	}
	for _, c := range []struct {
		name   string
		ranked []Ranked
		winner string
		price  Credits
	}{
		{"one bid is paid its bid", []Ranked{mk("a", 1_000_000, 0)}, "a", 1_000_000},
		{"equal but for price: the runner-up's price", []Ranked{mk("b", 1_500_000, .5), mk("a", 1_000_000, .5)}, "a", 1_500_000},
		// a: .2+.225 = .425, b: .25+.125 = .375; p* = 1.2 + 2*.05/.5 = 1.4
		{"reputation lead converts to price", []Ranked{mk("b", 1_000_000, .5), mk("a", 1_200_000, .9)}, "a", 1_400_000},
		{"clamped at max price", []Ranked{mk("a", 1_000_000, 1), mk("b", 1_900_000, 0)}, "a", max},
		{"exact tie: the cheaper wins at its bid", []Ranked{mk("b", 1_000_000, .5), mk("a", 1_000_000, .5)}, "a", 1_000_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, p, ok := Clear(c.ranked, max)
			if !ok || w.Bid.Provider != c.winner || p != c.price {
				t.Fatalf("got %s at %d (ok %v), want %s at %d", w.Bid.Provider, p, ok, c.winner, c.price)
			}
		})
	}
	if _, _, ok := Clear(nil, max); ok {
		t.Fatal("cleared nothing")
	}
	if _, _, ok := Clear([]Ranked{mk("a", max+1, 0)}, max); ok {
		t.Fatal("cleared a bid above max price")
	}
}

// TestPropertySecondScore: over random auctions, the clearing price lies in
// [winner's bid, max price]; unless clamped at max, the winner's score at
// that price ties the runner-up's (to within a millionth of a credit); and
// the price does not move when the winner lowers its bid, which is what
// makes bidding the true floor safe.
func TestPropertySecondScore(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for round := 0; round < 2000; round++ {
		spec, bids, offers := rankFixture(1 + r.Intn(8))
		spec.MaxPrice = Credits(1_500_000 + r.Intn(2_000_000))
		spec.Datasets = testDatasets[:r.Intn(3)]
		rep, rtt := mapRep{}, fixedRTT{}
		for i := range bids {
			p := bids[i].Provider
			bids[i].Price = Credits(1 + r.Int63n(int64(spec.MaxPrice)))
			offers[p].Prices.Bronze = 1 + bids[i].Price/2
			rep[p] = r.Float64()
			if r.Intn(4) > 0 {
				rtt[p] = time.Duration(r.Intn(300)) * time.Millisecond
			}
			for _, d := range testDatasets {
				if r.Intn(2) == 0 {
					offers[p].Datasets = append(offers[p].Datasets, d)
				}
			}
		}
		env := Env{Now: t0, RTT: rtt.rtt, Reputation: rep}
		ranked := Rank(spec, bids, offers, env)
		w, price, ok := Clear(ranked, spec.MaxPrice)
		if !ok || w.Bid.Provider != ranked[0].Bid.Provider {
			t.Fatalf("round %d: winner %s ok %v, ranked first %s", round, w.Bid.Provider, ok, ranked[0].Bid.Provider)
		}
		if price < w.Bid.Price || price > spec.MaxPrice {
			t.Fatalf("round %d: price %d outside [%d, %d]", round, price, w.Bid.Price, spec.MaxPrice)
		}
		if len(ranked) > 1 {
			at, runner := ScoreAt(w, price, spec.MaxPrice), ranked[1].Score
			tol := WeightPrice/float64(spec.MaxPrice) + 1e-12 // one millionth of a credit
			if at < runner-tol || price < spec.MaxPrice && at-runner > tol {
				t.Fatalf("round %d: winner's score at %d is %v, runner-up's %v", round, price, at, runner)
			}
		} else if price != w.Bid.Price {
			t.Fatalf("round %d: single bid paid %d, bid %d", round, price, w.Bid.Price)
		}
		// The winner shades its bid down: it still wins, at the same price
		// (with competition; a lone bid is paid what it asks).
		if len(ranked) < 2 {
			continue
		}
		for i := range bids {
			if bids[i].Provider == w.Bid.Provider {
				bids[i].Price = Credits(1 + r.Int63n(int64(w.Bid.Price)))
			}
		}
		w2, price2, _ := Clear(Rank(spec, bids, offers, env), spec.MaxPrice)
		if w2.Bid.Provider != w.Bid.Provider || price2 != price && math.Abs(float64(price2-price)) > 1 {
			t.Fatalf("round %d: lowering the bid moved the outcome from %s at %d to %s at %d",
				round, w.Bid.Provider, price, w2.Bid.Provider, price2)
		}
	}
}
