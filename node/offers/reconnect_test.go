package offers

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2ptest "github.com/libp2p/go-libp2p/core/test"
)

// An offer published before the provider had peers (the first one after a
// restart) is published again once peers join its topic: subscribers that
// connect afterwards get a newer offer within a few seconds, without the
// owner changing anything. A crowd that connects at once costs one
// publication, and once a publication reached someone newcomers cost
// none.
func TestAnOfferPublishedToNoOneGoesOutAgainForNewPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for reachGap")
	}
	c := newBenchCluster(t, "loopback", false)
	c.addHosts(t, 1)
	prov := c.hosts[0]
	m := startMarkets(t, c.hosts)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newBenchProvider(t, ctx, m, 1_000_000)
	go p.Run(ctx)
	waitFor(t, 5*time.Second, "the first offer", func() bool { return p.Current() != nil })
	time.Sleep(2 * minPublishGap) // Run's first round (the kick and the timer) is over
	seq0, unheard := p.Seq(), p.Current()

	// Bare subscribers of the offer topic: no market, so nothing fetches
	// the offer on connect; only gossip can bring it.
	type sub struct {
		h   *p2p.Host
		got atomic.Uint64 // highest sequence number received
	}
	subscribe := func() *sub {
		s := &sub{h: c.newHost(t)}
		topic, err := s.h.Join(offerTopicName("eu"), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := topic.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				msg, err := ts.Next(ctx)
				if err != nil {
					return
				}
				if o, _, err := auction.DecodeSignedOffer(msg.Data, time.Now()); err == nil && o.Seq > s.got.Load() {
					s.got.Store(o.Seq)
				}
			}
		}()
		return s
	}
	// Subscribed first, then connected all at once, like the known peers
	// a restarted provider dials.
	crowd := make([]*sub, 12)
	for i := range crowd {
		crowd[i] = subscribe()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range crowd {
		c.hosts = append(c.hosts, s.h)
		wg.Go(func() {
			if err := s.h.Connect(ctx, addrInfo(prov)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waitFor(t, reachPoll+reachGap, "the offer at a peer of the crowd", func() bool {
		for _, s := range crowd {
			if s.got.Load() > seq0 {
				return true
			}
		}
		return false
	})
	t.Logf("offer reached the crowd %v after it connected", time.Since(start).Round(time.Millisecond))
	time.Sleep(reachGap + 2*reachPoll)
	if n := p.Seq() - seq0; n != 1 {
		t.Fatalf("%d publications for %d peers connecting, want 1", n, len(crowd))
	}
	// The same offer again, not a new one: what it says is unchanged.
	if again := p.Current(); again.IssuedAt != unheard.IssuedAt || again.ExpiresAt != unheard.ExpiresAt {
		t.Fatalf("published again as issued %d expiring %d, was %d and %d", again.IssuedAt, again.ExpiresAt, unheard.IssuedAt, unheard.ExpiresAt)
	}
	// It reached someone: a newcomer costs nothing (with a market it
	// fetches the offer itself).
	late := subscribe()
	c.hosts = append(c.hosts, late.h)
	if err := late.h.Connect(ctx, addrInfo(prov)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reachGap + 2*reachPoll)
	if n := p.Seq() - seq0; n != 1 {
		t.Fatalf("a peer connecting after the offer reached %d peers caused %d more publications", len(crowd), n-1)
	}
}

// A peer that connects is asked for its offer at once, with no gossip and
// no DHT involved.
func TestAConnectingProviderIsAskedForItsOffer(t *testing.T) {
	c := newBenchCluster(t, "loopback", false)
	c.addHosts(t, 2)
	prov := startMarkets(t, c.hosts[:1])[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newBenchProvider(t, ctx, prov, 1_000_000)
	// The renter's market runs only its fetches on connect: no topics, no
	// DHT sweep, which could find the provider too.
	renter := NewMarket(c.hosts[1], 10, []string{"eu"}, quietLog)
	events, err := c.hosts[1].SubscribePeerEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go renter.connectLoop(ctx, events, renter.fetchPeer)
	var served atomic.Int64
	serve := ServeOffer(p.CurrentRaw)
	c.hosts[0].LibP2P().SetStreamHandler(c.hosts[0].ProtocolID(StreamProto), func(s network.Stream) {
		served.Add(1)
		serve(s)
	})
	if err := p.Publish(ctx); err != nil { // to nobody: no peers yet
		t.Fatal(err)
	}
	if err := c.hosts[1].Connect(ctx, addrInfo(c.hosts[0])); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the provider's offer in the book of the peer that connected", func() bool {
		o, _, ok := renter.Book().Get(c.hosts[0].ID().String())
		return ok && o.Seq == p.Seq()
	})
	if served.Load() != 1 {
		t.Fatalf("the offer was served %d times, want once", served.Load())
	}
}

// However many peers connect, the fetches on connect are bounded: a peer
// connectFetchBurst times and then once per connectFetchEvery,
// connectFetchParallel at a time and connectFetchQueue waiting; the rest
// are left to the sweep.
func TestFetchesOnConnectAreBounded(t *testing.T) {
	c := newBenchCluster(t, "loopback", false)
	c.addHosts(t, 1)
	m := NewMarket(c.hosts[0], 10, []string{"eu"}, quietLog)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var mu sync.Mutex
	fetched := map[peer.ID]int{}
	fetch := func(ctx context.Context, id peer.ID) error {
		mu.Lock()
		fetched[id]++
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	const distinct = 1000
	events := make(chan p2p.PeerEvent, distinct+100)
	repeat := libp2ptest.RandPeerIDFatal(t)
	for range 100 {
		events <- p2p.PeerEvent{Type: "connected", Peer: repeat}
	}
	for range distinct {
		events <- p2p.PeerEvent{Type: "connected", Peer: libp2ptest.RandPeerIDFatal(t)}
	}
	done := make(chan struct{})
	go func() { m.connectLoop(ctx, events, fetch); close(done) }()
	waitFor(t, 5*time.Second, "the loop to read every event", func() bool { return len(events) == 0 })
	close(events) // the loop handles what it read, then waits for its workers
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if fetched[repeat] != connectFetchBurst {
		t.Errorf("a peer connecting 100 times in a row was fetched %d times, want %d", fetched[repeat], connectFetchBurst)
	}
	if n := len(fetched); n > 1+connectFetchParallel+connectFetchQueue {
		t.Errorf("%d peers fetched after %d connections, want at most %d", n, distinct+100, 1+connectFetchParallel+connectFetchQueue)
	}
}
