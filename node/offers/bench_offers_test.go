package offers

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/p2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"golang.org/x/time/rate"
)

// Run with e.g.
//
//	go test -run '^$' -bench 'OfferPropagation|LateJoiner' -benchtime 10x -timeout 20m ./node/offers
//
// Both benchmarks use b.Loop, so their (expensive) cluster setup runs once
// per sub-benchmark, not once for the probe run and again for the real one.

const (
	propNodes   = 100
	bareTopic   = "bench/bare/1"
	deliverWait = 20 * time.Second // a message not everywhere by then fails the run
)

// BenchmarkOfferPropagation measures how long a freshly signed offer takes
// to reach the books of 99 other nodes, each a real market (validator,
// read loop, book), and, interleaved on the same hosts, how long a payload
// of the same size takes on a bare gossipsub topic with no validator.
//
// Delivery into a book is observed, not polled: every node has a second
// subscription to its market's eu topic. Gossipsub hands each validated
// message to all local subscriptions in one loop, so the observer wakes at
// the same moment as the market's read loop; it then yields until the
// book holds the offer's sequence number (the read loop's Put, normally
// a few microseconds later) and stamps the time. That is exact to the
// scheduler, checks that the offer really is in the book, and costs
// nothing between messages, where polling 99 books would either burn a
// core of a 2-core machine or blur the numbers by its period. The bare
// topic is stamped on delivery to its subscription.
//
// Latency runs from just before the offer is signed (signing is part of
// publishing an offer) to the stamp.
func BenchmarkOfferPropagation(b *testing.B) {
	for _, kind := range []string{"loopback", "latency25ms"} {
		b.Run(kind, func(b *testing.B) {
			c := newBenchCluster(b, kind, false)
			c.addHosts(b, propNodes)
			c.wireSparse(b)
			runOfferPropagation(b, c)
		})
	}
}

type arrival struct {
	seq uint64
	at  time.Time
}

func runOfferPropagation(b *testing.B, c *benchCluster) {
	hs := c.hosts
	mkts := startMarkets(b, hs)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)

	ours := make(chan arrival, 4*len(hs))
	bare := make(chan arrival, 4*len(hs))
	bareTopics := make([]*pubsub.Topic, len(hs))
	for i, m := range mkts {
		t, err := m.topic("eu")
		if err != nil {
			b.Fatal(err)
		}
		observe, err := t.Subscribe(pubsub.WithBufferSize(256))
		if err != nil {
			b.Fatal(err)
		}
		go observeBook(ctx, m, observe, ours)

		h := hs[i]
		if bareTopics[i], err = h.PubSub().Join(h.TopicName(bareTopic)); err != nil {
			b.Fatal(err)
		}
		sub, err := bareTopics[i].Subscribe(pubsub.WithBufferSize(256))
		if err != nil {
			b.Fatal(err)
		}
		go collectBare(ctx, h, sub, bare)
	}
	euName := hs[0].TopicName(offerTopicName("eu"))
	waitFor(b, 60*time.Second, "topic peers on every node", func() bool {
		for _, h := range hs {
			if len(h.PubSub().ListPeers(euName)) == 0 || len(h.PubSub().ListPeers(h.TopicName(bareTopic))) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(3 * time.Second) // a few heartbeats so meshes reach degree D
	waitQuiet(b, 0.5, 45*time.Second)

	pub := mkts[0]
	p := newBenchProvider(b, ctx, pub, 450_000)
	euTopic, err := pub.topic("eu")
	if err != nil {
		b.Fatal(err)
	}
	// Receivers allow an author offerRateBurst offers back to back and then
	// one per offerRate, rejecting (and penalising) the rest. Pacing the
	// publisher with a one-smaller bucket keeps any -benchtime legal; with
	// 10x it never waits.
	pace := rate.NewLimiter(offerRate, offerRateBurst-1)
	want := len(hs) - 1
	var latOurs, latBare []time.Duration
	var seq uint64
	for b.Loop() {
		seq++
		b.StopTimer()
		if err := pace.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		// Alternate the order so neither path always runs on a warmer system.
		var raw []byte
		if seq%2 == 1 {
			raw, latOurs = publishOffer(b, p, euTopic, seq, ours, want, latOurs)
			latBare = publishBare(b, bareTopics[0], seq, len(raw), bare, want, latBare)
		} else {
			latBare = publishBare(b, bareTopics[0], seq, lastOfferSize, bare, want, latBare)
			_, latOurs = publishOffer(b, p, euTopic, seq, ours, want, latOurs)
		}
	}
	p50, p95 := percentile(latOurs, 50), percentile(latOurs, 95)
	b50, b95 := percentile(latBare, 50), percentile(latBare, 95)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p95), "p95-ms")
	b.ReportMetric(ms(b50), "bare-p50-ms")
	b.ReportMetric(ms(b95), "bare-p95-ms")
	b.ReportMetric(float64(p95)/float64(b95), "p95-ratio")
	b.ReportMetric(float64(lastOfferSize), "offer-bytes")
}

// lastOfferSize is the size of the signed offers being published, so a bare
// message sent before its offer twin still gets the same size. Offers of
// one benchmark differ only in seq and timestamps: a byte at most.
var lastOfferSize = 1024

// observeBook stamps each offer from another node once it is in m's book.
func observeBook(ctx context.Context, m *Market, sub *pubsub.Subscription, out chan<- arrival) {
	self := m.host.ID()
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		o, ok := msg.ValidatorData.(*auction.Offer)
		if !ok || msg.ReceivedFrom == self {
			continue
		}
		// The read loop got this message at the same moment; wait for its
		// Put. Yield first (it is usually a few microseconds away), then
		// back off so a stuck Put cannot spin a core.
		for i := 0; ; i++ {
			if cur, _, ok := m.book.Get(o.Provider); ok && cur.Seq >= o.Seq {
				out <- arrival{o.Seq, time.Now()}
				break
			}
			if i < 1000 {
				runtime.Gosched()
			} else if i < 3000 {
				time.Sleep(100 * time.Microsecond)
			} else {
				break // not in the book after ~0.2 s: the publisher will time out and say so
			}
		}
	}
}

func collectBare(ctx context.Context, h *p2p.Host, sub *pubsub.Subscription, out chan<- arrival) {
	self := h.ID()
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		if msg.ReceivedFrom != self && len(msg.Data) >= 8 {
			out <- arrival{binary.BigEndian.Uint64(msg.Data), time.Now()}
		}
	}
}

// publishOffer signs p's current offer under seq with the host's key and
// publishes it as the provider would, and waits until want books hold it.
func publishOffer(b *testing.B, p *Publisher, t *pubsub.Topic, seq uint64, arrivals chan arrival, want int, lat []time.Duration) ([]byte, []time.Duration) {
	start := time.Now()
	p.mu.Lock()
	o, reason := p.build()
	p.mu.Unlock()
	if o == nil {
		b.Fatalf("provider offers nothing: %s", reason)
	}
	o.Seq = seq
	so, err := auction.SignOffer(o, p.key)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := so.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	lastOfferSize = len(raw)
	if err := t.Publish(context.Background(), raw); err != nil {
		b.Fatal(err)
	}
	return raw, await(b, "offer", seq, start, arrivals, want, lat)
}

// publishBare publishes size random bytes carrying seq on the bare topic.
func publishBare(b *testing.B, t *pubsub.Topic, seq uint64, size int, arrivals chan arrival, want int, lat []time.Duration) []time.Duration {
	payload := make([]byte, size)
	_, _ = rand.Read(payload)
	binary.BigEndian.PutUint64(payload, seq)
	start := time.Now()
	if err := t.Publish(context.Background(), payload); err != nil {
		b.Fatal(err)
	}
	return await(b, "bare message", seq, start, arrivals, want, lat)
}

func await(b *testing.B, what string, seq uint64, start time.Time, arrivals chan arrival, want int, lat []time.Duration) []time.Duration {
	timeout := time.After(deliverWait)
	for n := 0; n < want; {
		select {
		case a := <-arrivals:
			if a.seq == seq {
				lat = append(lat, a.at.Sub(start))
				n++
			}
		case <-timeout:
			b.Fatalf("%s %d reached %d of %d nodes in %v", what, seq, n, want, deliverWait)
		}
	}
	return lat
}

// Late joiners.

const (
	ljNodes     = 30
	ljProviders = 10 // every third node
)

// BenchmarkLateJoinerDiscovery measures how fast a node that joins after
// the offers were gossiped fills its book through the DHT: 30 nodes, 10 of
// them providers that published and provided their offers; each iteration
// starts a fresh node bootstrapped to one existing node, with a real market
// whose sweep loop finds providers and fetches their offers over
// /gleaner/N/offer/1. The clock starts before the node is created.
//
// found-frac is the mean fraction of the 10 offers in the joiner's book at
// the deadline (1 s on loopback, 2 s with 25 ms links); all-p50-ms and
// all-max-ms are the time until it held all 10 (capped at 10 s).
func BenchmarkLateJoinerDiscovery(b *testing.B) {
	for _, tc := range []struct {
		kind     string
		deadline time.Duration
	}{{"loopback", time.Second}, {"latency25ms", 2 * time.Second}} {
		b.Run(tc.kind, func(b *testing.B) {
			c := newBenchCluster(b, tc.kind, true)
			c.addHosts(b, ljNodes)
			c.wireSparse(b)
			runLateJoiner(b, c, tc.deadline)
		})
	}
}

func runLateJoiner(b *testing.B, c *benchCluster, deadline time.Duration) {
	hs := c.hosts
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	mkts := startMarkets(b, hs)
	// A provide needs a routing table; wait for every DHT to know someone.
	waitFor(b, 30*time.Second, "DHT routing tables", func() bool {
		for _, h := range hs {
			if h.DHT().RoutingTable().Size() == 0 {
				return false
			}
		}
		return true
	})

	var provs []*Publisher
	want := map[string]bool{}
	for i := 0; i < ljNodes && len(provs) < ljProviders; i += ljNodes / ljProviders {
		m := mkts[i]
		p := newBenchProvider(b, ctx, m, auction.Credits(100_000*(i+1)))
		m.host.LibP2P().SetStreamHandler(m.host.ProtocolID(StreamProto), ServeOffer(p.CurrentRaw))
		if err := p.Publish(ctx); err != nil {
			b.Fatal(err)
		}
		provs = append(provs, p)
		want[m.host.ID().String()] = true
	}
	// publish provides in the background; a provide that failed is only
	// retried at the next announcement, so retry it here.
	provided := func(p *Publisher) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.provided != ""
	}
	deadlineProvide := time.Now().Add(60 * time.Second)
	for _, p := range provs {
		for !provided(p) {
			if time.Now().After(deadlineProvide) {
				b.Fatal("provider records not in the DHT after 60 s")
			}
			time.Sleep(200 * time.Millisecond)
			if !provided(p) {
				p.mu.Lock()
				cur := p.current
				p.mu.Unlock()
				p.provide(ctx, cur)
			}
		}
	}
	// The records are stored; check that a lookup from a non-provider finds
	// all of them before measuring anything.
	key := hs[1].CapabilityCID("offer", "any")
	waitFor(b, 30*time.Second, "all providers found by a DHT lookup", func() bool {
		lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
		defer lcancel()
		found, _ := hs[1].FindProviders(lctx, key, 0)
		n := 0
		for _, ai := range found {
			if want[ai.ID.String()] {
				n++
			}
		}
		return n == len(want)
	})
	waitQuiet(b, 0.3, 45*time.Second)

	var fracs []float64
	var toAll []time.Duration
	iter := 0
	for b.Loop() {
		boot := hs[(iter*7+1)%len(hs)] // rotate the bootstrap node
		iter++
		frac, all := joinOnce(b, c, boot, want, deadline)
		fracs = append(fracs, frac)
		toAll = append(toAll, all)
		b.StopTimer()
		waitQuiet(b, 0.3, 5*time.Second) // let the departed joiner's traces settle
		b.StartTimer()
	}
	var sum float64
	for _, f := range fracs {
		sum += f
	}
	b.ReportMetric(sum/float64(len(fracs)), "found-frac")
	b.ReportMetric(ms(percentile(toAll, 50)), "all-p50-ms")
	b.ReportMetric(ms(percentile(toAll, 100)), "all-max-ms")
}

const joinCap = 10 * time.Second

// joinOnce starts a late joiner bootstrapped to boot and returns the
// fraction of want in its book at deadline and the time until it held all
// of want (joinCap if never).
func joinOnce(b *testing.B, c *benchCluster, boot *p2p.Host, want map[string]bool, deadline time.Duration) (float64, time.Duration) {
	start := time.Now()
	h := c.newHost(b, p2p.Bootstrap(addrInfo(boot)))
	defer c.dropHost(h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := NewMarket(h, 1000, []string{"eu"}, quietLog)
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	count := func() int {
		n := 0
		for p := range want {
			if _, _, ok := m.book.Get(p); ok {
				n++
			}
		}
		return n
	}
	frac := -1.0
	for {
		n := count()
		el := time.Since(start)
		if frac < 0 && el >= deadline {
			frac = float64(n) / float64(len(want))
		}
		if n == len(want) {
			if frac < 0 {
				frac = 1
			}
			return frac, el
		}
		if el >= joinCap {
			b.Logf("late joiner %s (bootstrap %s): %d of %d offers after %v; %d peers, routing table %d",
				h.ID(), boot.ID(), n, len(want), joinCap, len(h.LibP2P().Network().Peers()), h.DHT().RoutingTable().Size())
			return frac, joinCap
		}
		time.Sleep(2 * time.Millisecond)
	}
}
