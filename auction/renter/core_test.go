package renter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/provider"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// The market core end to end without libp2p: the real auctioneer over an
// in-memory transport to providers that are the real scheduler
// (auction/provider), the real bid engine and the real award guard
// (provider.HonoursBid), as node wires them, minus streams, bbolt and
// Docker.

// coreProvider is node's provider side with its adapters taken away.
type coreProvider struct {
	key    crypto.PrivKey
	id     string
	offer  *auction.Offer
	sched  *provider.Scheduler
	engine auction.BidEngine
	clock  Clock
}

func newCoreProvider(t testing.TB, seed int64, floor auction.Credits, gpus int, clock Clock) *coreProvider {
	fp := newFakeProvider(t, seed, floor, gpus, clock)
	inv := attest.Inventory{}
	var avail []int
	for i := range gpus {
		inv.GPUs = append(inv.GPUs, attest.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d-%d", seed, i), Model: "H100", VRAMMiB: 81559})
		avail = append(avail, i)
	}
	s := provider.New()
	s.SetAvailability(attest.Availability{Inventory: inv, Available: avail}, clock.Now())
	s.SetWindows(fp.offer.Windows, clock.Now())
	return &coreProvider{key: fp.key, id: fp.id, offer: fp.offer, sched: s, clock: clock}
}

func (p *coreProvider) quote(jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil {
		return nil, "bad job spec: " + err.Error(), nil
	}
	now := p.clock.Now()
	bid, decl := p.engine.Quote(spec, p.offer, p.sched.Utilisation(spec.Tier, now), now)
	if decl != nil {
		return nil, decl.Reason, nil
	}
	bid.JobID, bid.Nonce = jobID, nonce
	start := time.Unix(bid.Start, 0)
	plan, err := p.sched.Plan(bid.GPUs, spec.Tier, provider.Span{Start: start, End: start.Add(time.Duration(bid.DurationSec) * time.Second)}, now)
	if err != nil {
		return nil, auction.ReasonBusy, nil
	}
	if bid.GPUHashes, err = p.sched.Hashes(plan); err != nil {
		return nil, "", err
	}
	sb, err := auction.SignBid(&bid, p.key)
	if err != nil {
		return nil, "", err
	}
	raw, err := sb.Marshal()
	return raw, "", err
}

func (p *coreProvider) award(proposal []byte) ([]byte, string, error) {
	l, sl, err := auction.DecodeSignedLease(proposal, false)
	if err != nil {
		return nil, err.Error(), nil
	}
	bid, _, err := auction.DecodeSignedBid(l.Bid, p.clock.Now())
	if err != nil {
		return nil, err.Error(), nil
	}
	if err := provider.HonoursBid(l, bid, p.clock.Now()); err != nil {
		return nil, err.Error(), nil
	}
	want, err := p.sched.Indexes(bid.GPUHashes)
	if err != nil {
		return nil, err.Error(), nil
	}
	if _, err := p.sched.Claim(l, want, p.clock.Now()); err != nil {
		if errors.Is(err, provider.ErrRaced) {
			return nil, RefusedRaced, nil
		}
		return nil, err.Error(), nil
	}
	if err := sl.CounterSign(p.key); err != nil {
		return nil, "", err
	}
	raw, err := sl.Marshal()
	return raw, "", err
}

type coreTransport map[string]*coreProvider

func (c coreTransport) Quote(_ context.Context, provider, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	return c[provider].quote(jobID, nonce, specYAML)
}

func (c coreTransport) Award(_ context.Context, provider string, proposal []byte) ([]byte, string, error) {
	return c[provider].award(proposal)
}

// TestMarketCoreWithoutLibp2p: 40 jobs placed at once by 15 renters onto
// 5 providers with 8 GPUs each all get leases from the real schedulers,
// no GPU is committed twice, every lease starts exactly once, and an
// award never started expires in virtual time.
func TestMarketCoreWithoutLibp2p(t *testing.T) {
	// The wall clock: lost races wait a few milliseconds of jitter, and the
	// schedulers are told the time at every call, so virtual time is only
	// needed for the expiry, which passes its own now.
	clock := Wall
	net := coreTransport{}
	var book fakeBook
	for i := range 5 {
		p := newCoreProvider(t, int64(i+1), auction.Credits(1_000_000+10_000*i), 8, clock)
		net[p.id] = p
		book = append(book, p.offer)
	}
	var renters []*Auctioneer
	for i := range 15 {
		key, id := testKey(t, int64(100+i))
		a, err := New(Identity{Peer: id, Network: testNetwork, Key: key}, net, book)
		if err != nil {
			t.Fatal(err)
		}
		renters = append(renters, a)
	}
	spec := testSpec()
	spec.Retry.MaxReauctions = 0 // a no-match would fail the job: none is allowed while GPUs are free
	results := make([]Result, 40)
	errs := make([]error, 40)
	var wg sync.WaitGroup
	for k := range 40 {
		wg.Go(func() {
			results[k], errs[k] = renters[k%15].Place(context.Background(), request(t, fmt.Sprintf("burst-%02d", k), spec), Policy{})
		})
	}
	wg.Wait()
	leased := map[string]int{}
	for k, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", k, err)
		}
		leased[results[k].Lease.Provider]++
	}
	for id, p := range net {
		if leased[id] != 8 {
			t.Errorf("provider %s leased %d of its 8 GPUs", id[:12], leased[id])
		}
		seen := map[int]string{}
		for _, c := range p.sched.Commitments(clock.Now()) {
			if other, dup := seen[c.GPU]; dup {
				t.Fatalf("GPU %d committed to %s and %s", c.GPU, other, c.JobID)
			}
			seen[c.GPU] = c.JobID
		}
	}
	// Every lease starts once; the one left unstarted expires.
	for k, res := range results[:39] {
		p := net[res.Lease.Provider]
		if _, err := p.sched.Start(res.Lease.JobID, clock.Now()); err != nil {
			t.Fatalf("job %d's first start: %v", k, err)
		}
		if _, err := p.sched.Start(res.Lease.JobID, clock.Now()); !errors.Is(err, provider.ErrStarted) {
			t.Fatalf("job %d's second start: %v, want ErrStarted", k, err)
		}
	}
	last := results[39].Lease
	var expired bool
	for _, a := range net[last.Provider].sched.Tick(clock.Now().Add(provider.DefaultStartDeadline + time.Second)) {
		expired = expired || (a.Kind == provider.Expire && a.JobID == last.JobID)
	}
	if !expired {
		t.Fatalf("the award never started did not expire")
	}
}
