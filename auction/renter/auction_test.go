package renter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

func TestAuctionWinnerAndClearingPrice(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000, 1_500_000)
	spec := testSpec()
	req := request(t, "job-1", spec)
	res, err := m.auctioneer(t).Auction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	l, ex, p1 := res.Lease, res.Explain, m.providers[0]
	// Reputation, RTT and locality are equal, so only the price decides:
	// the cheapest wins and is paid the runner-up's bid, the price at
	// which their scores tie.
	if l.Provider != p1.id || l.Price != 1_200_000 || ex.Winner != p1.id || ex.ClearingPrice != 1_200_000 {
		t.Fatalf("winner %s at %d (explain %s at %d), want %s at 1200000", l.Provider, l.Price, ex.Winner, ex.ClearingPrice, p1.id)
	}
	bid := bidOf(t, l)
	hash, _ := auction.SpecHash(spec)
	switch {
	case l.JobID != "job-1" || l.Renter != m.renter.Peer || l.Network != testNetwork || l.Tier != auction.Bronze || l.GPUs != 1:
		t.Errorf("lease parties/terms: %+v", l)
	case l.Start != t0.Unix() || l.Start != bid.Start || l.End != bid.Start+bid.DurationSec || l.End-l.Start != 3600:
		t.Errorf("window %d..%d, bid %d+%d", l.Start, l.End, bid.Start, bid.DurationSec)
	case l.NoticeSec != 60 || l.NoticeSec != bid.NoticeSec || l.BillingSec != 300:
		t.Errorf("notice %d, billing %d", l.NoticeSec, l.BillingSec)
	case !bytes.Equal(l.SpecHash, hash) || !slices.Equal(l.GPUUUIDHash, []string{p1.gpus[0]}):
		t.Errorf("spec hash %x, GPUs %v", l.SpecHash, l.GPUUUIDHash)
	}
	got, sl, err := auction.DecodeSignedLease(res.Raw, true)
	if err != nil || got.Provider != p1.id || sl.CID().String() == "" {
		t.Fatalf("the result's bytes are not the co-signed lease: %v", err)
	}
	want := []QuoteOutcome{{Provider: p1.id, Bid: 1_000_000}, {Provider: m.providers[1].id, Bid: 1_200_000}, {Provider: m.providers[2].id, Bid: 1_500_000}}
	if ex.Considered != 3 || !slices.Equal(ex.Quotes, want) || len(ex.Ranked) != 3 || len(ex.Awards) != 1 || ex.Awards[0].Error != "" {
		t.Errorf("explain: considered %d, quotes %+v, ranked %d, awards %+v", ex.Considered, ex.Quotes, len(ex.Ranked), ex.Awards)
	}
	if _, _, used := p1.counts(); used != 1 {
		t.Errorf("winner holds %d GPUs, want 1", used)
	}
}

func TestAuctionFallsBackOnRefusal(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000, 1_500_000)
	m.providers[0].refuse = "the owner took the machine back"
	res, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-1", testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := m.providers[0], m.providers[1]
	// Cleared again without the refusing winner: the runner-up is now p3.
	if res.Lease.Provider != p2.id || res.Lease.Price != 1_500_000 {
		t.Fatalf("lease with %s at %d, want %s at 1500000", res.Lease.Provider, res.Lease.Price, p2.id)
	}
	want := []AwardOutcome{{Provider: p1.id, Price: 1_200_000, Refused: p1.refuse}, {Provider: p2.id, Price: 1_500_000}}
	if !slices.Equal(res.Explain.Awards, want) {
		t.Errorf("awards %+v, want %+v", res.Explain.Awards, want)
	}
}

func TestAuctionIgnoresBadBids(t *testing.T) {
	other := sha256.Sum256([]byte("another spec"))
	gold := func(s *auction.JobSpec) {
		s.Tier, s.Start, s.MaxPrice = auction.Gold, t0.Add(2*time.Hour), 4_000_000
	}
	for _, c := range []struct {
		name   string
		spec   func(*auction.JobSpec)
		mutate func(*auction.Bid)
		relay  func(m *market) func(context.Context, string, []byte, []byte) ([]byte, error)
		why    string
	}{
		{name: "another spec hash", mutate: func(b *auction.Bid) { b.SpecHash = other[:] }, why: "another job spec"},
		{name: "another nonce", mutate: func(b *auction.Bid) { b.Nonce = []byte("replayed-round") }, why: "not for this job, round or provider"},
		{name: "another job", mutate: func(b *auction.Bid) { b.JobID = "job-2" }, why: "not for this job, round or provider"},
		{name: "shorter window", mutate: func(b *auction.Bid) { b.DurationSec = 1800 }, why: "shorter than duration.max"},
		{name: "expired", mutate: func(b *auction.Bid) { b.ValidUntil = t0.Unix() }, why: "bid expired"},
		{name: "gold at another start", spec: gold, mutate: func(b *auction.Bid) { b.Start += 3600 }, why: "another start"},
		{name: "another provider's bid", why: "not for this job, round or provider",
			relay: func(m *market) func(context.Context, string, []byte, []byte) ([]byte, error) {
				return func(ctx context.Context, job string, nonce, spec []byte) ([]byte, error) {
					raw, _, err := m.providers[2].quote(ctx, job, nonce, spec)
					return raw, err
				}
			}},
		{name: "not a bid", why: "bid not canonically encoded",
			relay: func(*market) func(context.Context, string, []byte, []byte) ([]byte, error) {
				return func(context.Context, string, []byte, []byte) ([]byte, error) { return []byte("not a bid"), nil }
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000, 1_500_000)
			spec := testSpec()
			if c.spec != nil {
				c.spec(spec)
			}
			bad := m.providers[0]
			bad.mutate = c.mutate
			if c.relay != nil {
				bad.relay = c.relay(m)
			}
			res, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-1", spec))
			if err != nil {
				t.Fatal(err)
			}
			if q := res.Explain.Quotes[0]; q.Provider != bad.id || !strings.HasPrefix(q.Error, "bad bid: ") || !strings.Contains(q.Error, c.why) || q.Bid != 0 {
				t.Errorf("the bad bid's outcome: %+v, want a bad bid: ...%s...", q, c.why)
			}
			if _, awards, _ := bad.counts(); awards != 0 || res.Lease.Provider != m.providers[1].id {
				t.Errorf("lease with %s, %d awards to the bad bidder; want the next bidder", res.Lease.Provider, awards)
			}
		})
	}
}

func TestAuctionNeverAsksConvictedOrExcluded(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_100_000, 1_200_000, 1_500_000)
	convicted, excluded := m.providers[0], m.providers[1]
	m.trust.convicted[convicted.id] = true
	req := request(t, "job-1", testSpec())
	req.Exclude = map[string]bool{excluded.id: true}
	res, err := m.auctioneer(t).Auction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*fakeProvider{convicted, excluded} {
		if q, a, _ := p.counts(); q+a != 0 {
			t.Errorf("%s was asked: %d quotes, %d awards", p.id, q, a)
		}
	}
	if res.Lease.Provider != m.providers[2].id || res.Explain.Considered != 2 {
		t.Errorf("lease with %s of %d considered, want %s of 2", res.Lease.Provider, res.Explain.Considered, m.providers[2].id)
	}
}

func TestAuctionPin(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000, 1_500_000)
	pin := m.providers[2]
	req := request(t, "canary-1", testSpec())
	req.Pin = pin.id
	res, err := m.auctioneer(t).Auction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// One bid: it is paid as bid.
	if res.Lease.Provider != pin.id || res.Lease.Price != 1_500_000 || res.Explain.Considered != 1 {
		t.Fatalf("lease with %s at %d of %d considered, want the pin at its bid", res.Lease.Provider, res.Lease.Price, res.Explain.Considered)
	}
	for _, p := range m.providers[:2] {
		if q, _, _ := p.counts(); q != 0 {
			t.Errorf("%s was asked though the job is pinned", p.id)
		}
	}
}

func TestAuctionNoMatchAndRaced(t *testing.T) {
	t.Run("nothing feasible", func(t *testing.T) {
		m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000)
		spec := testSpec()
		spec.MaxPrice = 900_000
		_, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-1", spec))
		var nm *NoMatchError
		if !errors.As(err, &nm) || !errors.Is(err, ErrNoMatch) || errors.Is(err, ErrRaced) || nm.Feasible != 0 || nm.Considered != 2 {
			t.Fatalf("err %v, want no match with none feasible", err)
		}
		if q, _, _ := m.providers[0].counts(); q != 0 {
			t.Error("a provider was asked although none is feasible")
		}
	})
	t.Run("every candidate declines", func(t *testing.T) {
		m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000)
		for _, p := range m.providers {
			p.decline = auction.ReasonBusy
		}
		_, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-1", testSpec()))
		var nm *NoMatchError
		if !errors.As(err, &nm) || errors.Is(err, ErrRaced) || nm.Feasible != 2 {
			t.Fatalf("err %v, want no acceptable bid of 2 feasible", err)
		}
	})
	t.Run("every award raced", func(t *testing.T) {
		m := newMarket(t, newManualClock(t0), 1, 1_000_000, 1_200_000)
		a := racedAfterQuote(t, m, "victim")
		res, err := a.Auction(context.Background(), request(t, "victim", testSpec()))
		if !errors.Is(err, ErrRaced) || !errors.Is(err, ErrNoMatch) {
			t.Fatalf("err %v, want raced", err)
		}
		if len(res.Explain.Awards) != 2 || !res.Explain.Awards[0].Raced || !res.Explain.Awards[1].Raced {
			t.Errorf("awards %+v, want two raced", res.Explain.Awards)
		}
	})
	// A provider slow to answer an award under a burst does not turn a
	// round lost to races into a no-match; a provider that refuses for
	// another reason does.
	for _, c := range []struct {
		name    string
		answer  awardAnswer
		isRaced bool
	}{
		{"raced, then unanswered", awardAnswer{err: errors.New("no answer to the award before its deadline")}, true},
		{"raced, then refused otherwise", awardAnswer{refusal: "the lease does not honour our bid"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMarket(t, newManualClock(t0), 1, 1_000_000, 1_200_000)
			racedAfterQuote(t, m, "victim")
			second := m.providers[1].id
			a, err := New(m.renter, answerAward{fakeTransport{net: m.net, from: m.renter.Peer}, second, c.answer}, m.book(),
				WithClock(m.clock), WithTrust(m.trust))
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Auction(context.Background(), request(t, "victim", testSpec()))
			if errors.Is(err, ErrRaced) != c.isRaced || !errors.Is(err, ErrNoMatch) {
				t.Fatalf("err %v, want raced %v; awards %+v", err, c.isRaced, res.Explain.Awards)
			}
		})
	}
}

// awardAnswer is what answerAward gives instead of the provider's answer.
type awardAnswer struct {
	refusal string
	err     error
}

// answerAward answers every award to provider with answer.
type answerAward struct {
	Transport
	provider string
	answer   awardAnswer
}

func (t answerAward) Award(ctx context.Context, provider string, proposal []byte) ([]byte, string, error) {
	if provider == t.provider {
		return nil, t.answer.refusal, t.answer.err
	}
	return t.Transport.Award(ctx, provider, proposal)
}

// racedAfterQuote makes every provider of m lease its first free GPU to
// another renter's job right after quoting job victim, once: the victim's
// awards then find the GPUs their bids named taken, as in a burst.
func racedAfterQuote(t *testing.T, m *market, victim string) *Auctioneer {
	a := m.auctioneer(t)
	for i, p := range m.providers {
		done := false
		p.afterQuote = func(job string) {
			if job != victim || done {
				return
			}
			done = true
			req := request(t, "interloper-"+string(rune('a'+i)), testSpec())
			req.Pin = p.id
			if _, err := a.Auction(context.Background(), req); err != nil {
				t.Errorf("the interloper got no lease: %v", err)
			}
		}
	}
	return a
}

func TestAuctionReplicasGetDistinctProviders(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000, 1_500_000)
	a, g := m.auctioneer(t), NewGroup()
	got := make(chan string, 3)
	for _, id := range []string{"r-1", "r-2", "r-3"} {
		go func() {
			req := request(t, id, testSpec())
			req.Group = g
			res, err := a.Auction(context.Background(), req)
			if err != nil {
				t.Error(err)
				got <- ""
				return
			}
			got <- res.Lease.Provider
		}()
	}
	seen := map[string]bool{}
	for range 3 {
		seen[<-got] = true
	}
	if len(seen) != 3 || seen[""] || len(g.Held()) != 3 {
		t.Fatalf("replicas placed on %v (group holds %v), want three distinct providers", seen, g.Held())
	}
}
