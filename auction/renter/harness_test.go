package renter

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"gopkg.in/yaml.v3"
)

// manualClock is virtual time that moves only when a test advances it. It
// is not a DeadlineClock, so the auctioneer's deadlines sleep on it too.
type manualClock struct {
	mu      sync.Mutex // guards now, waiters, slept
	now     time.Time
	waiters []*waiter
	slept   []time.Duration // every Sleep asked for, in order
}

type waiter struct {
	at time.Time
	ch chan struct{}
}

func newManualClock(now time.Time) *manualClock { return &manualClock{now: now} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	c.mu.Lock()
	w := &waiter{at: c.now.Add(d), ch: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.slept = append(c.slept, d)
	c.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		for i, x := range c.waiters {
			if x == w {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return ctx.Err()
	}
}

// advance moves time by d and wakes every sleeper due by then.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
		} else {
			close(w.ch)
		}
	}
	c.waiters = kept
}

// next is how far the earliest sleeper is from now; false when none sleeps.
func (c *manualClock) next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) == 0 {
		return 0, false
	}
	ws := append([]*waiter(nil), c.waiters...)
	sort.Slice(ws, func(a, b int) bool { return ws[a].at.Before(ws[b].at) })
	return ws[0].at.Sub(c.now), true
}

// market is a renter and fake providers on one fake network.
type market struct {
	clock     Clock
	net       *fakeNet
	providers []*fakeProvider
	trust     fakeTrust
	renter    Identity
}

const renterSeed = 1000

// newMarket has one fake provider per floor (bronze, Credits per
// GPU-hour), each with gpus GPUs, seeds 1, 2, ... in order.
func newMarket(t testing.TB, clock Clock, gpus int, floors ...auction.Credits) *market {
	t.Helper()
	key, id := testKey(t, renterSeed)
	m := &market{clock: clock, net: &fakeNet{providers: map[string]*fakeProvider{}},
		trust:  fakeTrust{rep: map[string]float64{}, convicted: map[string]bool{}, rtt: map[string]time.Duration{}},
		renter: Identity{Peer: id, Network: testNetwork, Key: key}}
	for i, f := range floors {
		p := newFakeProvider(t, int64(i+1), f, gpus, clock)
		m.providers = append(m.providers, p)
		m.net.providers[p.id] = p
	}
	return m
}

func (m *market) book() fakeBook {
	var b fakeBook
	for _, p := range m.providers {
		b = append(b, p.offer)
	}
	return b
}

func (m *market) auctioneer(t testing.TB, opts ...Option) *Auctioneer {
	t.Helper()
	opts = append([]Option{WithClock(m.clock), WithTrust(m.trust)}, opts...)
	a, err := New(m.renter, fakeTransport{net: m.net, from: m.renter.Peer}, m.book(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testSpec is a one-GPU bronze batch job in Europe, at most 2 credits per
// GPU-hour for at most an hour.
func testSpec() *auction.JobSpec {
	return &auction.JobSpec{
		Name: "train", Image: "registry.example/team/train:1.4",
		Resources: auction.Resources{GPUs: 1, MinVRAMGB: 40},
		Tier:      auction.Bronze, MaxPrice: 2_000_000,
		Duration:  auction.JobDuration{Expected: time.Hour, Max: time.Hour},
		Placement: auction.Placement{Regions: []string{"eu"}},
		Workload:  "batch",
	}
}

// request is a Request for job id running spec, as node builds it.
func request(t testing.TB, id string, spec *auction.JobSpec) Request {
	t.Helper()
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auction.ParseJobSpec(raw); err != nil {
		t.Fatalf("test spec does not parse: %v\n%s", err, raw)
	}
	return Request{JobID: id, SpecYAML: raw, Spec: spec, BillingSec: 300}
}

// bidOf decodes the winning bid a lease carries.
func bidOf(t testing.TB, l *auction.Lease) *auction.Bid {
	t.Helper()
	b, _, err := auction.DecodeSignedBid(l.Bid, time.Unix(l.Start, 0))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
