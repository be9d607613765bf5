package auction

import (
	"math"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
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
	// max_price 2: QualityCap 0.4 credits, of which reputation 0.2, RTT
	// 0.12, locality 0.08; each part is its share times the normalised
	// value, rounded down to Credits.
	wantCredit := map[string]QualityCredit{
		a: {Reputation: 180_000, RTT: 108_000, Locality: 0},     // 0.288: Effective 1.5 - 0.288 = 1.212
		b: {Reputation: 100_000, RTT: 60_000, Locality: 40_000}, // 0.2: Effective 1.0
		c: {Reputation: 100_000, RTT: 60_000, Locality: 80_000}, // 0.24: Effective 0.96
	}
	wantScore := map[string]float64{a: 0.72, b: 0.5, c: 0.6} // (50 rep + 30 rtt + 20 locality) / 100
	for _, r := range got {
		p := r.Bid.Provider
		w := want[p]
		if math.Abs(r.Parts.Price-w.Price) > 1e-12 || r.Parts.Reputation != w.Reputation ||
			math.Abs(r.Parts.RTT-w.RTT) > 1e-12 || r.Parts.Locality != w.Locality {
			t.Errorf("%s: parts %+v, want %+v", p, r.Parts, w)
		}
		if math.Abs(r.Score-wantScore[p]) > 1e-12 {
			t.Errorf("%s: score %v, want %v", p, r.Score, wantScore[p])
		}
		if r.Credit != wantCredit[p] || r.Effective != r.Bid.Price-wantCredit[p].Total() {
			t.Errorf("%s: credit %+v effective %d, want %+v effective %d", p, r.Credit, r.Effective, wantCredit[p], r.Bid.Price-wantCredit[p].Total())
		}
	}
	// Lowest Effective first: c 0.96, b 1.0, a 1.212. a's better
	// reputation and RTT are worth 0.088 over b, not the 0.3 it asks more.
	if got[0].Bid.Provider != c || got[1].Bid.Provider != b || got[2].Bid.Provider != a {
		t.Fatalf("order %s %s %s, want c b a", got[0].Bid.Provider, got[1].Bid.Provider, got[2].Bid.Provider)
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
	const max = 2_000_000 // QualityCap 0.4: reputation's share 0.2
	mk := func(provider string, price Credits, rep float64) Ranked {
		return ScoreBid(Bid{Provider: provider, Price: price}, ScoreParts{Reputation: rep}, max)
	}
	for _, c := range []struct {
		name   string
		ranked []Ranked
		winner string
		price  Credits
	}{
		{"one bid is paid its bid", []Ranked{mk("a", 1_000_000, 0)}, "a", 1_000_000},
		{"equal but for price: the runner-up's price", []Ranked{mk("b", 1_500_000, .5), mk("a", 1_000_000, .5)}, "a", 1_500_000},
		// a: credit 0.18, Effective 0.87; b: credit 0.1, Effective 0.9.
		// a wins, paid b's bid plus the credits' difference: 1.0 + 0.08.
		{"reputation lead converts to a premium", []Ranked{mk("b", 1_000_000, .5), mk("a", 1_050_000, .9)}, "a", 1_080_000},
		// a: Effective 1.2 - 0.18 = 1.02; b: 0.9. The lead is worth 0.08,
		// not the 0.2 a asks more: b wins at a's Effective + 0.1 = 1.12.
		{"reputation does not cover a higher ask", []Ranked{mk("b", 1_000_000, .5), mk("a", 1_200_000, .9)}, "b", 1_120_000},
		// a: credit 0.2, Effective 0.8; b: 1.9. 1.9 + 0.2 = 2.1 > max.
		{"clamped at max price", []Ranked{mk("a", 1_000_000, 1), mk("b", 1_900_000, 0)}, "a", max},
		{"exact tie: the cheaper wins at its bid", []Ranked{mk("b", 1_000_000, .5), mk("a", 1_000_000, .5)}, "a", 1_000_000},
		// Equal Effective (1.1 - 0.2 = 0.9 = 1.0 - 0.1): the lower ask
		// wins, paid b's Effective + its own credit, its bid.
		{"equal Effective: the lower ask wins at its bid", []Ranked{mk("a", 1_100_000, 1), mk("b", 1_000_000, .5)}, "b", 1_000_000},
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
