package renter

import (
	"context"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A bronze job is placed where it can run to its end (issue 33's
// placement that respects windows): the cheapest provider's window
// closes within the job's hour, another's GPU is taken by a bronze job
// already, so the round awards the dearest provider, whose window and
// GPUs leave the job undisturbed. Once that one is gone, the job still
// runs where it would be preempted rather than wait, but is not sent to
// the GPU another bronze job holds.
func TestBronzeIsPlacedWhereItCanFinish(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 1, 1_000_000, 1_100_000, 1_500_000)
	closing, bronzeTaken, calm := m.providers[0], m.providers[1], m.providers[2]
	closing.offer.Windows = []auction.Window{{Start: closing.offer.IssuedAt, End: t0.Add(20 * time.Minute).Unix()}}
	bronzeTaken.offer.Bronze = []auction.Booking{{Start: bronzeTaken.offer.IssuedAt, End: t0.Add(3 * time.Hour).Unix(), GPUs: 1}}
	for _, p := range m.providers {
		if err := p.offer.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-1", testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.Provider != calm.id {
		t.Fatalf("leased %s, want the undisturbed provider %s (quotes %+v)", res.Lease.Provider, calm.id, res.Explain.Quotes)
	}
	if res.Explain.Feasible != 3 || res.Explain.Undisturbed != 1 {
		t.Errorf("explain: %d feasible, %d undisturbed; want 3 and 1", res.Explain.Feasible, res.Explain.Undisturbed)
	}
	if len(res.Explain.Quotes) != 1 {
		t.Errorf("asked %d providers for quotes, want only the undisturbed one: %+v", len(res.Explain.Quotes), res.Explain.Quotes)
	}

	m.providers = m.providers[:2]
	delete(m.net.providers, calm.id)
	res, err = m.auctioneer(t).Auction(context.Background(), request(t, "job-2", testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.Provider != closing.id {
		t.Fatalf("with no undisturbed offer leased %s, want the cheapest feasible %s", res.Lease.Provider, closing.id)
	}
	// Bronze preempts no one: the provider whose only GPU a bronze job
	// holds would decline it as fully utilised, so it is not asked.
	for _, q := range res.Explain.Quotes {
		if q.Provider == bronzeTaken.id {
			t.Errorf("asked %s, whose only GPU a bronze job holds: %+v", q.Provider, res.Explain.Quotes)
		}
	}
}

// A silver job prefers GPUs it need not preempt a bronze job for: the
// cheaper provider's only GPU runs a bronze job, which the silver lease
// would displace, so the idle one wins.
func TestSilverPrefersIdleGPUsToPreemptingBronze(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 1, 1_000_000, 1_300_000)
	busy, idle := m.providers[0], m.providers[1]
	busy.offer.Bronze = []auction.Booking{{Start: busy.offer.IssuedAt, End: t0.Add(2 * time.Hour).Unix(), GPUs: 1}}
	if err := busy.offer.Validate(); err != nil {
		t.Fatal(err)
	}
	spec := testSpec()
	spec.Tier, spec.MaxPrice = auction.Silver, 3_000_000
	res, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-1", spec))
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.Provider != idle.id {
		t.Fatalf("leased %s, want the idle provider %s", res.Lease.Provider, idle.id)
	}
}

// Best fit: a one-GPU job goes where it fills the machine most closely,
// so the cheapest provider's eight free GPUs stay whole for a job that
// needs them; with two candidates a round, the second-tightest is asked
// too, as the runner-up that prices the winner.
func TestSmallJobsLeaveWholeMachinesWhole(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000, 1_500_000)
	whole, oneFree, twoFree := m.providers[0], m.providers[1], m.providers[2]
	until := t0.Add(3 * time.Hour).Unix()
	oneFree.offer.Bronze = []auction.Booking{{Start: oneFree.offer.IssuedAt, End: until, GPUs: 7}}
	twoFree.offer.Bronze = []auction.Booking{{Start: twoFree.offer.IssuedAt, End: until, GPUs: 6}}
	spec := testSpec()
	spec.Tier, spec.MaxPrice = auction.Silver, 3_000_000
	res, err := m.auctioneer(t, WithCandidates(2)).Auction(context.Background(), request(t, "job-1", spec))
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.Provider != oneFree.id {
		t.Fatalf("leased %s, want the tightest fit %s", res.Lease.Provider, oneFree.id)
	}
	for _, q := range res.Explain.Quotes {
		if q.Provider == whole.id {
			t.Fatalf("asked the whole machine %s for a one-GPU job: %+v", whole.id, res.Explain.Quotes)
		}
	}
	if len(res.Explain.Quotes) != 2 {
		t.Fatalf("asked %d providers, want the two tightest fits: %+v", len(res.Explain.Quotes), res.Explain.Quotes)
	}

	// An eight-GPU job fits only the whole machine.
	spec.Resources.GPUs = 8
	res, err = m.auctioneer(t, WithCandidates(2)).Auction(context.Background(), request(t, "job-8", spec))
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.Provider != whole.id {
		t.Fatalf("the eight-GPU job leased %s, want %s", res.Lease.Provider, whole.id)
	}
}

// The simulator's alternative rule: the same winner, paid its own bid;
// the second-score price it would have had stays in the Explain.
func TestPayAsBidPaysTheWinnersBid(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000, 1_500_000)
	res, err := m.auctioneer(t, WithPayAsBid()).Auction(context.Background(), request(t, "job-1", testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	ex := res.Explain
	if res.Lease.Provider != m.providers[0].id || res.Lease.Price != 1_000_000 || ex.Rule != RulePayAsBid || ex.SecondScore != 1_200_000 {
		t.Fatalf("lease %s at %d, rule %s, second score %d; want %s at 1000000 (pay-as-bid), second score 1200000",
			res.Lease.Provider, res.Lease.Price, ex.Rule, ex.SecondScore, m.providers[0].id)
	}
}
