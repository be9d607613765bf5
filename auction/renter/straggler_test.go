package renter

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Issue 33's burst tail, as the renter sees it: a round neither waits out
// a slow provider once enough bids are in, nor keeps the losers' GPUs
// held while its award is on its way.

// Once a quorum has answered with a bid among the answers, a provider
// that has not answered is given StragglerGrace (the quorum took no time
// on this clock) and then cut, not waited for until the 3 s quote
// deadline: with two bids in, and with one bid and a decline as held
// (a burst's usual round).
func TestRoundClosesOnStragglers(t *testing.T) {
	for name, second := range map[string]string{"two bids": "", "a bid and a held": auction.ReasonHeld} {
		t.Run(name, func(t *testing.T) { roundClosesOnStragglers(t, second) })
	}
}

func roundClosesOnStragglers(t *testing.T, secondDeclines string) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 8, 1_000_000, 1_200_000, 1_400_000)
	m.providers[1].decline = secondDeclines
	m.providers[2].hang = true
	a := m.auctioneer(t)
	var res Result
	var err error
	steps := drive(t, clock, func() { res, err = a.Auction(context.Background(), request(t, "job-1", testSpec())) })
	if err != nil || res.Lease.Provider != m.providers[0].id {
		t.Fatalf("err %v; want the cheapest provider that answered to win", err)
	}
	if !slices.Equal(steps, []time.Duration{StragglerGrace}) {
		t.Errorf("waited %v, want the straggler grace %v alone", steps, StragglerGrace)
	}
	if got := res.Explain.Quotes[2].Error; got != errQuoteStraggled.Error() {
		t.Errorf("the slow provider's outcome says %q, want %q", got, errQuoteStraggled)
	}
}

// With one answer in, or only declines, the round still waits for the
// others until the deadline: a cut must never make a round that would
// have leased end without a match.
func TestRoundWithoutQuorumWaitsForTheDeadline(t *testing.T) {
	for name, set := range map[string]func(ps []*fakeProvider){
		"one bid": func(ps []*fakeProvider) { ps[1].hang, ps[2].hang = true, true },
		"declines only": func(ps []*fakeProvider) {
			ps[0].decline, ps[1].decline, ps[2].hang = auction.ReasonHeld, auction.ReasonHeld, true
		},
	} {
		t.Run(name, func(t *testing.T) {
			clock := newManualClock(t0)
			m := newMarket(t, clock, 8, 1_000_000, 1_200_000, 1_400_000)
			set(m.providers)
			a := m.auctioneer(t)
			steps := drive(t, clock, func() { _, _ = a.Auction(context.Background(), request(t, "job-1", testSpec())) })
			if !slices.Equal(steps, []time.Duration{DefaultQuoteDeadline}) {
				t.Errorf("waited %v, want the quote deadline alone", steps)
			}
		})
	}
}

// awardSpy records which releases had been sent when the award left.
type awardSpy struct {
	Transport
	rel  *releasing
	mu   sync.Mutex
	seen [][]string // per award, the providers released by then
}

func (s *awardSpy) Award(ctx context.Context, provider string, proposal []byte) ([]byte, string, error) {
	s.mu.Lock()
	s.seen = append(s.seen, s.rel.providers())
	s.mu.Unlock()
	return s.Transport.Award(ctx, provider, proposal)
}

// The losers' holds are released before the winner's award is sent, so
// that other renters' rounds find those GPUs free while the award (its
// trip, the provider's durable write) is under way; the winner is not
// released.
func TestLosersReleasedBeforeTheAward(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_100_000, 1_200_000)
	spy := &awardSpy{Transport: fakeTransport{net: m.net, from: m.renter.Peer}}
	a, rel := m.releasingAuctioneer(t, spy)
	spy.rel = rel
	res, err := a.Auction(context.Background(), request(t, "job-1", testSpec()))
	if err != nil || res.Lease.Provider != m.providers[0].id {
		t.Fatalf("err %v; want the cheapest to win", err)
	}
	want := sortedIDs(m.providers[1], m.providers[2])
	if len(spy.seen) != 1 || !slices.Equal(spy.seen[0], want) {
		t.Fatalf("released %v when the award left, want the losers %v", spy.seen, want)
	}
	if got := rel.providers(); !slices.Equal(got, want) {
		t.Fatalf("released %v in all, want the losers %v", got, want)
	}
}

// hangFirst leaves the first quote to each provider unanswered until the
// round gives up on it, then answers as the provider does.
type hangFirst struct {
	fakeTransport
	mu    sync.Mutex
	asked map[string]bool
}

func (h *hangFirst) Quote(ctx context.Context, provider, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	h.mu.Lock()
	first := !h.asked[provider]
	h.asked[provider] = true
	h.mu.Unlock()
	if first {
		<-ctx.Done()
		return nil, "", ctx.Err()
	}
	return h.fakeTransport.Quote(ctx, provider, jobID, nonce, specYAML)
}

// A round that no provider answered in time (providers slow under a
// burst) is asked again after a jitter, spending no re-auction, instead
// of backing off a second and spending one: a spec that allows none
// still gets its lease.
func TestUnansweredRoundAsksAgainAtOnce(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 8, 1_000_000, 1_100_000)
	tr := &hangFirst{fakeTransport: fakeTransport{net: m.net, from: m.renter.Peer}, asked: map[string]bool{}}
	a, _ := m.releasingAuctioneer(t, tr)
	var res Result
	var err error
	steps := drive(t, clock, func() {
		res, err = a.Place(context.Background(), request(t, "job-1", testSpec()), Policy{MaxReauctions: 0})
	})
	if err != nil || res.Attempt != 0 {
		t.Fatalf("err %v, attempt %d; want a lease without a re-auction", err, res.Attempt)
	}
	if len(steps) != 2 || steps[0] != DefaultQuoteDeadline || steps[1] < 20*time.Millisecond || steps[1] >= 100*time.Millisecond {
		t.Errorf("waited %v, want the quote deadline and then one jitter in [20ms, 100ms)", steps)
	}
}
