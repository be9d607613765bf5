package providing

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
)

// gateStore is a lease store whose first write waits for gate (a slow
// fsync), counting the writes.
type gateStore struct {
	*memStore
	gate    chan struct{}
	mu      sync.Mutex
	updates int
}

func (g *gateStore) Update(fn func(Tx) error) error {
	g.mu.Lock()
	g.updates++
	first := g.updates == 1
	g.mu.Unlock()
	if first {
		<-g.gate
	}
	return g.memStore.Update(fn)
}

// proposal quotes job for rt and returns its award's proposal, as the
// renter's node would send it.
func (rt *renter) proposal(job string) []byte {
	t := rt.r.t
	t.Helper()
	rep := rt.r.pj.quote(wire.QuoteRequest{JobID: job, Nonce: []byte("the renter nonce"), Spec: spec(job, auction.Silver)}, rt.id)
	if rep.Decline != "" {
		t.Fatalf("quote for %s declined: %s", job, rep.Decline)
	}
	b, _, err := auction.DecodeSignedBid(rep.Bid, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sl, err := auction.ProposeLease(&auction.Lease{JobID: job, Network: testNet, Renter: rt.id, Provider: b.Provider,
		Tier: b.Tier, Price: b.Price, GPUs: b.GPUs, Start: b.Start, End: b.Start + b.DurationSec,
		NoticeSec: b.NoticeSec, BillingSec: 300, Bid: rep.Bid, GPUUUIDHash: b.GPUHashes, SpecHash: b.SpecHash}, rt.key)
	if err != nil {
		t.Fatal(err)
	}
	prop, err := sl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return prop
}

// Awards that arrive while another award's lease is being written are
// written together: one lease-store transaction and one feed append for
// all of them (issue 33's burst, where one write at a time per award
// made the last of 8 awards wait for 16 fsyncs). Each is durable and
// journaled before its renter hears of it.
func TestAwardsArrivingTogetherAreWrittenTogether(t *testing.T) {
	key, _ := testKey(t)
	gs := &gateStore{memStore: newMemStore(), gate: make(chan struct{})}
	var mu sync.Mutex
	var appends [][]string // the jobs of each feed append of leases
	r := newRigOver(t, 5, key, gs.memStore, newFakeExec(), func(c *Config) {
		c.Store = gs
		c.RecordAll = func(typ string, payloads [][]byte) {
			mu.Lock()
			defer mu.Unlock()
			var jobs []string
			for _, p := range payloads {
				l, _, err := auction.DecodeSignedLease(p, true)
				if err != nil {
					t.Error(err)
					continue
				}
				jobs = append(jobs, l.JobID)
			}
			if typ == ledger.TypeLease {
				appends = append(appends, jobs)
			}
		}
	})
	defer r.cancel()
	props := make([][]byte, 5)
	for i := range props {
		props[i] = r.renter().proposal(fmt.Sprintf("job%d", i))
	}
	froms := make([]string, 5) // each award's renter, as its stream authenticates it
	for i, p := range props {
		l, _, err := auction.ReadLease(p)
		if err != nil {
			t.Fatal(err)
		}
		froms[i] = l.Renter
	}
	type res struct {
		raw []byte
		err error
	}
	out := make([]res, 5)
	var wg sync.WaitGroup
	accept := func(i int) {
		wg.Go(func() {
			raw, err := r.pj.accept(props[i], froms[i])
			out[i] = res{raw, err}
			if err == nil && gs.memStore.Get(fmt.Sprintf("job%d", i), &Record{}) != nil {
				t.Errorf("job%d's lease returned before it was stored", i)
			}
		})
	}
	accept(0) // its write waits at the gate
	waitFor(t, 5*time.Second, "the first award's write", func() bool { gs.mu.Lock(); defer gs.mu.Unlock(); return gs.updates == 1 })
	for i := 1; i < 5; i++ {
		accept(i)
	}
	waitFor(t, 5*time.Second, "four awards queued", func() bool {
		r.pj.awards.mu.Lock()
		defer r.pj.awards.mu.Unlock()
		return len(r.pj.awards.pending) == 4
	})
	close(gs.gate)
	wg.Wait()
	for i, o := range out {
		if o.err != nil || o.raw == nil {
			t.Fatalf("award %d: %v", i, o.err)
		}
	}
	if gs.updates != 2 {
		t.Errorf("%d lease-store writes for 5 awards, 4 of them arriving during the first's write; want 2", gs.updates)
	}
	if len(appends) != 2 || len(appends[1]) != 4 {
		t.Errorf("feed appends of leases %v, want [job0] then the other four together", appends)
	}
}
