package renter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/provider"
)

// Late binding as the renter sees it (issue 33): it releases the losing
// quotes' holds, asks again when GPUs are promised to other quotes, and a
// burst onto providers that hold their quotes leases every job without an
// award refused for a race.

type released struct {
	provider, job string
	nonce         []byte
}

// releasing is a Transport that records every release (a Releaser).
type releasing struct {
	Transport
	mu  sync.Mutex
	got []released
}

func (r *releasing) Release(_ context.Context, provider, jobID string, nonce []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, released{provider, jobID, slices.Clone(nonce)})
	return nil
}

func (r *releasing) providers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.got {
		out = append(out, x.provider)
	}
	slices.Sort(out)
	return out
}

func (m *market) releasingAuctioneer(t testing.TB, tr Transport) (*Auctioneer, *releasing) {
	t.Helper()
	if tr == nil {
		tr = fakeTransport{net: m.net, from: m.renter.Peer}
	}
	rel := &releasing{Transport: tr}
	a, err := New(m.renter, rel, m.book(), WithClock(m.clock), WithTrust(m.trust))
	if err != nil {
		t.Fatal(err)
	}
	return a, rel
}

func sortedIDs(ps ...*fakeProvider) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.id)
	}
	slices.Sort(out)
	return out
}

// Once the award is co-signed, every other provider that quoted is told
// to release its hold, for this job and this round's nonce; the winner is
// not, nor a provider that declined (it holds nothing).
func TestReleaseLosersAfterAward(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_100_000, 1_200_000, 1_300_000)
	m.providers[3].decline = auction.ReasonBusy
	a, rel := m.releasingAuctioneer(t, nil)
	res, err := a.Auction(context.Background(), request(t, "job-1", testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.Provider != m.providers[0].id {
		t.Fatalf("leased to %s, want the cheapest", res.Lease.Provider)
	}
	if got, want := rel.providers(), sortedIDs(m.providers[1], m.providers[2]); !slices.Equal(got, want) {
		t.Fatalf("released %v, want the two losing bidders %v", got, want)
	}
	nonce := bidOf(t, res.Lease).Nonce
	for _, r := range rel.got {
		if r.job != "job-1" || !bytes.Equal(r.nonce, nonce) {
			t.Fatalf("release %+v, want job-1 under the round's nonce %x", r, nonce)
		}
	}
}

// A round that leases nothing releases every bidder.
func TestReleaseAllWhenNothingLeased(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_100_000)
	for _, p := range m.providers {
		p.refuse = "no longer available"
	}
	a, rel := m.releasingAuctioneer(t, nil)
	if _, err := a.Auction(context.Background(), request(t, "job-1", testSpec())); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("err %v, want no match", err)
	}
	if got, want := rel.providers(), sortedIDs(m.providers...); !slices.Equal(got, want) {
		t.Fatalf("released %v, want every bidder %v", got, want)
	}
}

// declineFirst declines the first n quotes of every provider with reason,
// then answers as the provider does.
type declineFirst struct {
	fakeTransport
	reason string
	mu     sync.Mutex
	left   map[string]int
}

func (d *declineFirst) Quote(ctx context.Context, provider, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	d.mu.Lock()
	n := d.left[provider]
	d.left[provider] = n - 1
	d.mu.Unlock()
	if n > 0 {
		return nil, d.reason, nil
	}
	return d.fakeTransport.Quote(ctx, provider, jobID, nonce, specYAML)
}

// A round declined because the free GPUs are promised to other live
// quotes is a race, not a no-match: Place asks again at once and spends no
// re-auction, and goes on asking for HeldPatience, beyond the race rounds
// (12 held rounds here, 8 race rounds); a round declined as fully
// utilised is a no-match.
func TestHeldDeclineAsksAgain(t *testing.T) {
	for _, c := range []struct {
		reason string
		raced  bool
		rounds int
	}{{auction.ReasonHeld, true, 1}, {auction.ReasonHeld, true, 12}, {auction.ReasonBusy, false, 1}} {
		t.Run(fmt.Sprint(c.reason, c.rounds), func(t *testing.T) {
			clock := newManualClock(t0)
			m := newMarket(t, clock, 8, 1_000_000, 1_100_000)
			left := map[string]int{}
			for _, p := range m.providers {
				left[p.id] = c.rounds + 1
			}
			tr := &declineFirst{fakeTransport: fakeTransport{net: m.net, from: m.renter.Peer}, reason: c.reason, left: left}
			a, _ := m.releasingAuctioneer(t, tr)
			_, err := a.Auction(context.Background(), request(t, "job-1", testSpec()))
			var nm *NoMatchError
			if !errors.As(err, &nm) || errors.Is(err, ErrRaced) != c.raced || nm.Held != c.raced {
				t.Fatalf("first round: %v (%+v), want raced %v", err, nm, c.raced)
			}
			var res Result
			drive(t, clock, func() {
				res, err = a.Place(context.Background(), request(t, "job-1", testSpec()), Policy{MaxReauctions: 0})
			})
			if !c.raced {
				if !errors.Is(err, ErrNoMatch) {
					t.Fatalf("Place: %v, want no match with no re-auction left", err)
				}
				return
			}
			if err != nil || res.Lease == nil {
				t.Fatalf("Place: %v, want a lease after asking again", err)
			}
			if res.Races != c.rounds || res.Attempt != 0 {
				t.Fatalf("%d race rounds, %d re-auctions; want %d and 0", res.Races, res.Attempt, c.rounds)
			}
		})
	}
}

// deskProvider is node's provider reduced to the real desk and scheduler
// (auction/provider), quote holds and all.
type deskProvider struct {
	desk   *provider.Desk
	offer  *auction.Offer
	clock  Clock
	raced  atomic.Int64 // awards refused as raced
	quotes atomic.Int64
}

func newDeskProvider(t testing.TB, seed int64, floor auction.Credits, gpus int, clock Clock) *deskProvider {
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
	return &deskProvider{desk: &provider.Desk{Engine: &auction.BidEngine{}, Sched: s, Key: fp.key, Self: fp.id, Network: testNetwork},
		offer: fp.offer, clock: clock}
}

// deskTransport is one renter's in-memory link to desk providers.
type deskTransport struct {
	net  map[string]*deskProvider
	from string
}

func (d deskTransport) Quote(_ context.Context, p, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	dp := d.net[p]
	dp.quotes.Add(1)
	raw, decline := dp.desk.Quote(specYAML, jobID, d.from, nonce, dp.offer, dp.clock.Now())
	return raw, decline, nil
}

func (d deskTransport) Award(_ context.Context, p string, proposal []byte) ([]byte, string, error) {
	dp := d.net[p]
	now := dp.clock.Now()
	aw, err := dp.desk.CheckAward(proposal, d.from, now)
	if err != nil {
		return nil, err.Error(), nil
	}
	if _, err := dp.desk.Sched.Claim(aw.Lease, aw.GPUs, now); err != nil {
		if errors.Is(err, provider.ErrRaced) {
			dp.raced.Add(1)
			return nil, RefusedRaced, nil
		}
		return nil, err.Error(), nil
	}
	if err := aw.Signed.CounterSign(dp.desk.Key); err != nil {
		return nil, "", err
	}
	raw, err := aw.Signed.Marshal()
	return raw, "", err
}

func (d deskTransport) Release(_ context.Context, p, jobID string, nonce []byte) error {
	dp := d.net[p]
	dp.desk.Release(jobID, d.from, nonce, dp.clock.Now())
	return nil
}

// The burst of issue 33: 40 renters at once, one job each, onto 5
// providers with 8 GPUs each and distinct floors, so that every renter
// ranks the same cheapest provider first. Every job is leased with no
// re-auction (a no-match fails it), and no award is refused for a race:
// the bound is zero, since a quote's hold (10 s) outlives any round of an
// in-process burst, and only an award whose hold lapsed or was never
// placed (beyond the caps, which 40 renters do not reach) can race. At
// the end no hold is left: each was claimed or released.
//
// The renters have paid these providers before (established): a
// newcomer's unstarted award is soft by design (auction/provider's
// newcomer rule), and quotes name its GPUs once no free one is left, so
// that a squatter hides no capacity; an award for such a GPU races the
// newcomer's start. That is a race of the newcomer rule, not of quotes,
// and holds leave it as it was.
func TestBurstOfFortyRentersNeverRaces(t *testing.T) {
	clock := Wall
	net := map[string]*deskProvider{}
	var book fakeBook
	for i := range 5 {
		p := newDeskProvider(t, int64(i+1), auction.Credits(1_000_000+10_000*i), 8, clock)
		net[p.desk.Self] = p
		book = append(book, p.offer)
	}
	spec := testSpec()
	spec.Retry.MaxReauctions = 0
	results := make([]Result, 40)
	errs := make([]error, 40)
	var wg sync.WaitGroup
	for k := range 40 {
		key, id := testKey(t, int64(200+k))
		a, err := New(Identity{Peer: id, Network: testNetwork, Key: key}, deskTransport{net: net, from: id}, book)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range net {
			p.desk.Sched.Establish(id)
		}
		wg.Go(func() {
			results[k], errs[k] = a.Place(context.Background(), request(t, fmt.Sprintf("burst-%02d", k), spec), Policy{})
		})
	}
	wg.Wait()
	leased, rounds := map[string]int{}, 0
	for k, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", k, err)
		}
		leased[results[k].Lease.Provider]++
		rounds += results[k].Races
	}
	var raced, quotes int64
	for id, p := range net {
		if leased[id] != 8 {
			t.Errorf("provider %s leased %d of its 8 GPUs", id[:12], leased[id])
		}
		raced += p.raced.Load()
		quotes += p.quotes.Load()
		if n := p.desk.Sched.Holds(clock.Now()); n != 0 {
			t.Errorf("provider %s: %d holds left after the burst, want every one claimed or released", id[:12], n)
		}
		seen := map[int]string{}
		for _, c := range p.desk.Sched.Commitments(clock.Now()) {
			if other, dup := seen[c.GPU]; dup {
				t.Fatalf("GPU %d committed to %s and %s", c.GPU, other, c.JobID)
			}
			seen[c.GPU] = c.JobID
		}
	}
	if raced != 0 {
		t.Errorf("%d awards refused for a race, want none", raced)
	}
	t.Logf("40 jobs leased: %d quotes, %d rounds asked again (GPUs promised to other quotes), %d awards raced", quotes, rounds, raced)
}

var _ Releaser = deskTransport{}
