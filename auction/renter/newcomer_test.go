package renter

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// trackTrust is fakeTrust with the ledger's track records: a Tracker.
type trackTrust struct {
	fakeTrust
	track map[string]TrackRecord
}

func (t trackTrust) Track(p string) TrackRecord { return t.track[p] }

// probed is a newcomer's record: one lease, its canary passed.
var probed = TrackRecord{Leases: 1, ProbesPassed: 1}

// newcomerMarket is two established providers, E1 at 1.0 and E2 at 1.2
// (reputation 0.9), and newcomers at the given floors (reputation 0, one
// passed probe), 16 GPUs each. With testSpec (max_price 2, no datasets,
// no RTT measured) QualityCap is 0.4, of which reputation's share is 0.2
// and locality's 0.08, so:
//
//	E1: credit 0.18 + 0.08 = 0.26, Effective 0.74
//	E2: credit 0.26,               Effective 0.94
//	newcomer at f: credit 0.08,     Effective f - 0.08
//
// T, what E1 is paid against E2 alone, is 0.94 + 0.26 = 1.2.
func newcomerMarket(t *testing.T, newcomers ...auction.Credits) (*market, trackTrust) {
	m := newMarket(t, newManualClock(t0), 16, append([]auction.Credits{1_000_000, 1_200_000}, newcomers...)...)
	tt := trackTrust{fakeTrust: m.trust, track: map[string]TrackRecord{}}
	for i, p := range m.providers {
		if i < 2 {
			m.trust.rep[p.id] = 0.9
			tt.track[p.id] = TrackRecord{Leases: 40, ProbesPassed: 5}
		} else {
			m.trust.rep[p.id] = 0
			tt.track[p.id] = probed
		}
	}
	return m, tt
}

func TestNewcomerWinsASmallJob(t *testing.T) {
	m, tt := newcomerMarket(t, 950_000)
	e1, n := m.providers[0], m.providers[2]
	a := m.auctioneer(t, WithTrust(tt))
	// Round 1 is open to newcomers. Cleared as usual, E1 would win at the
	// runner-up N's Effective plus its credit, 0.87 + 0.26 = 1.13. N's bid
	// 0.95 is at most T = 1.2, so N wins, paid T (no other newcomer bids
	// lower): the most it could have asked and still won.
	res, err := a.Auction(context.Background(), request(t, "job-1", testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	ex := res.Explain
	if res.Lease.Provider != n.id || res.Lease.Price != 1_200_000 || ex.Rule != RuleNewcomer || !slices.Equal(ex.Newcomers, []string{n.id}) {
		t.Fatalf("round 1: %s at %d by %q (newcomers %v), want the newcomer at 1200000", res.Lease.Provider, res.Lease.Price, ex.Rule, ex.Newcomers)
	}
	if ex.Ranked[0].Bid.Provider != e1.id || ex.Ranked[0].Effective != 740_000 || ex.Ranked[1].Effective != 870_000 {
		t.Errorf("ranking %+v, want E1 first at 0.74, N at 0.87", ex.Ranked[:2])
	}
	// The next nine rounds are not open: E1 wins at 1.13. The eleventh is.
	for i := 2; i <= 11; i++ {
		res, err := a.Auction(context.Background(), request(t, "job-"+string(rune('a'+i)), testSpec()))
		if err != nil {
			t.Fatal(err)
		}
		want, price, rule := e1.id, auction.Credits(1_130_000), RuleSecondPrice
		if i == 11 {
			want, price, rule = n.id, 1_200_000, RuleNewcomer
		}
		if res.Lease.Provider != want || res.Lease.Price != price || res.Explain.Rule != rule || (i < 11) != (res.Explain.Newcomers == nil) {
			t.Fatalf("round %d: %s at %d by %q (newcomers %v), want %s at %d by %q", i, res.Lease.Provider, res.Lease.Price,
				res.Explain.Rule, res.Explain.Newcomers, want, price, rule)
		}
	}
}

func TestNewcomerRuleApplies(t *testing.T) {
	for _, c := range []struct {
		name   string
		floors []auction.Credits // the newcomers'
		spec   func(*auction.JobSpec)
		track  *TrackRecord // the first newcomer's, when not probed
		refuse bool         // the first newcomer refuses the award
		winner int          // index into the providers: 0 E1, 1 E2, 2.. newcomers
		price  auction.Credits
		rule   string
	}{
		// The lower of the newcomers wins, paid the other's bid (< T).
		{name: "two newcomers", floors: []auction.Credits{950_000, 1_050_000}, winner: 2, price: 1_050_000, rule: RuleNewcomer},
		// N asks more than T: E1 wins as usual, against E2 (N's Effective
		// 1.17 is above E2's 0.94), at 0.94 + 0.26.
		{name: "bid above T", floors: []auction.Credits{1_250_000}, winner: 0, price: 1_200_000, rule: RuleSecondPrice},
		// N beats E1 on Effective (0.72 < 0.74), normally paid 0.74 + 0.08
		// = 0.82; in an open round it is paid T, as it would have won the
		// newcomer slot with any bid up to T.
		{name: "newcomer wins on price", floors: []auction.Credits{800_000}, winner: 2, price: 1_200_000, rule: RuleNewcomer},
		// Not small jobs: two GPUs, two hours. E1 at 1.13 as usual.
		{name: "two GPUs", floors: []auction.Credits{950_000}, spec: func(s *auction.JobSpec) { s.Resources.GPUs = 2 }, winner: 0, price: 1_130_000, rule: RuleSecondPrice},
		{name: "two hours", floors: []auction.Credits{950_000}, spec: func(s *auction.JobSpec) {
			s.Duration = auction.JobDuration{Expected: 2 * time.Hour, Max: 2 * time.Hour}
		},
			winner: 0, price: 1_130_000, rule: RuleSecondPrice},
		// Not newcomers: never probed, a failed probe, a history.
		{name: "no probe", floors: []auction.Credits{950_000}, track: &TrackRecord{Leases: 1}, winner: 0, price: 1_130_000, rule: RuleSecondPrice},
		{name: "failed a probe", floors: []auction.Credits{950_000}, track: &TrackRecord{Leases: 2, ProbesPassed: 1, ProbesFailed: 1}, winner: 0, price: 1_130_000, rule: RuleSecondPrice},
		{name: "a history", floors: []auction.Credits{950_000}, track: &TrackRecord{Leases: NewcomerMaxLeases + 1, ProbesPassed: 1}, winner: 0, price: 1_130_000, rule: RuleSecondPrice},
		// The newcomer refuses: E1 gets the award, cleared without N at T.
		{name: "newcomer refuses", floors: []auction.Credits{950_000}, refuse: true, winner: 0, price: 1_200_000, rule: RuleSecondPrice},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, tt := newcomerMarket(t, c.floors...)
			first := m.providers[2]
			if c.track != nil {
				tt.track[first.id] = *c.track
			}
			if c.refuse {
				first.refuse = "busy after all"
			}
			spec := testSpec()
			if c.spec != nil {
				c.spec(spec)
			}
			res, err := m.auctioneer(t, WithTrust(tt)).Auction(context.Background(), request(t, "job-1", spec))
			if err != nil {
				t.Fatal(err)
			}
			want := m.providers[c.winner]
			if res.Lease.Provider != want.id || res.Lease.Price != c.price || res.Explain.Rule != c.rule {
				t.Fatalf("%s at %d by %q, want provider %d at %d by %q", res.Lease.Provider, res.Lease.Price, res.Explain.Rule, c.winner, c.price, c.rule)
			}
			if c.refuse && (len(res.Explain.Awards) != 2 || res.Explain.Awards[0].Provider != first.id || res.Explain.Awards[0].Price != 1_200_000) {
				t.Errorf("awards %+v, want the newcomer's at 1200000 refused first", res.Explain.Awards)
			}
		})
	}
}

// A small job after a large one is still the first small-job round: only
// small-job rounds count towards the one in ten.
func TestNewcomerRoundsCountOnlySmallJobs(t *testing.T) {
	m, tt := newcomerMarket(t, 950_000)
	a := m.auctioneer(t, WithTrust(tt))
	big := testSpec()
	big.Resources.GPUs = 2
	if res, err := a.Auction(context.Background(), request(t, "big", big)); err != nil || res.Explain.Rule != RuleSecondPrice {
		t.Fatalf("large job: %v, %+v", err, res.Explain)
	}
	if res, err := a.Auction(context.Background(), request(t, "small", testSpec())); err != nil || res.Explain.Rule != RuleNewcomer {
		t.Fatalf("small job after a large one: %v, rule %q", err, res.Explain.Rule)
	}
	off := m.auctioneer(t, WithTrust(tt), WithNewcomers(-1))
	if res, err := off.Auction(context.Background(), request(t, "small-2", testSpec())); err != nil || res.Explain.Rule != RuleSecondPrice {
		t.Fatalf("newcomers off: %v, rule %q", err, res.Explain.Rule)
	}
}

// TestPropertyNewcomerRound: over random rounds open to newcomers (random
// bids, qualities and newcomer sets), the price is within [own bid,
// max_price]; a newcomer chosen over an established winner is paid at
// most T; without newcomers the round is exactly auction.Clear; and no
// bidder gains by bidding other than its floor, nor does a winner's price
// move with its own bid.
func TestPropertyNewcomerRound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	slots, profits, flips := 0, 0, 0
	for iter := range 2000 {
		M := auction.Credits(200_000 + r.IntN(3_000_000))
		n := 2 + r.IntN(6)
		parts := make([]auction.ScoreParts, n)
		bids := make([]auction.Credits, n)
		newcomer := map[string]bool{}
		for i := range n {
			parts[i] = auction.ScoreParts{Reputation: r.Float64(), RTT: r.Float64(), Locality: float64(r.IntN(3)) / 2}
			bids[i] = auction.Credits(1 + r.Int64N(int64(M)))
			if r.IntN(3) == 0 {
				newcomer[name(i)] = true
				parts[i].Reputation = 0
			}
		}
		round := func(bids []auction.Credits) (auction.Ranked, auction.Credits, string, []auction.Ranked) {
			rs := make([]auction.Ranked, n)
			for i := range n {
				rs[i] = auction.ScoreBid(auction.Bid{Provider: name(i), Price: bids[i]}, parts[i], M)
			}
			w, p, rule, ok := clearRound(rs, M, newcomer)
			if !ok {
				t.Fatalf("iteration %d: nothing cleared", iter)
			}
			return w, p, rule, rs
		}
		w, p, rule, rs := round(bids)
		if p < w.Bid.Price || p > M {
			t.Fatalf("iteration %d: %s paid %d outside [%d, %d]", iter, w.Bid.Provider, p, w.Bid.Price, M)
		}
		cw, cp, _ := auction.Clear(rs, M)
		if len(newcomer) == 0 && (rule != RuleSecondPrice || cw.Bid.Provider != w.Bid.Provider || cp != p) {
			t.Fatalf("iteration %d: without newcomers %s at %d, Clear says %s at %d", iter, w.Bid.Provider, p, cw.Bid.Provider, cp)
		}
		if rule == RuleNewcomer {
			slots++
			var est []auction.Ranked
			for _, x := range rs {
				if !newcomer[x.Bid.Provider] {
					est = append(est, x)
				}
			}
			_, T, _ := auction.Clear(est, M)
			if !newcomer[w.Bid.Provider] || !newcomer[cw.Bid.Provider] && p > T {
				t.Fatalf("iteration %d: newcomer rule gave %s (newcomer %v) %d, T %d", iter, w.Bid.Provider, newcomer[w.Bid.Provider], p, T)
			}
		}
		for i := range n {
			floor := bids[i]
			u0, won := auction.Credits(0), w.Bid.Provider == name(i)
			if won {
				u0 = p - floor
				profits += b2i(u0 > 0)
			}
			devs := []auction.Credits{1, floor - 1, floor + 1, M, p, p + 1, p - 1}
			for range 8 {
				devs = append(devs, auction.Credits(1+r.Int64N(int64(M))))
			}
			for _, d := range devs {
				if d <= 0 || d > M || d == floor {
					continue
				}
				dev := slices.Clone(bids)
				dev[i] = d
				w2, p2, _, _ := round(dev)
				wins := w2.Bid.Provider == name(i)
				if wins && p2-floor > u0 {
					t.Fatalf("iteration %d: %s (newcomer %v) with floor %d gains bidding %d: paid %d, truthful utility %d",
						iter, name(i), newcomer[name(i)], floor, d, p2, u0)
				}
				if won && wins && p2 != p {
					t.Fatalf("iteration %d: the winner's price moved from %d to %d with its bid", iter, p, p2)
				}
				flips += b2i(won != wins)
			}
		}
	}
	t.Logf("%d newcomer awards, %d profitable wins, %d flips", slots, profits, flips)
	if slots < 200 || profits < 500 || flips < 2000 {
		t.Errorf("hardly exercised: %d newcomer awards, %d profitable wins, %d flips", slots, profits, flips)
	}
}

func name(i int) string { return string(rune('a' + i)) }
