package offers

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// Shared scaffolding for the market benchmarks: clusters of p2p hosts on
// loopback TCP or on a mocknet with fixed link latency, each host carrying
// a real market, and optionally a real publisher.

var quietLog = slog.New(slog.DiscardHandler)

const benchNetwork = "bench"

// benchCluster is a set of hosts of one kind: "loopback" (real TCP on
// 127.0.0.1) or "latency25ms" (mocknet, 25 ms per link direction).
type benchCluster struct {
	kind  string
	mn    mocknet.Mocknet // nil on loopback
	hosts []*p2p.Host
	next  int // mocknet address counter
	// linkNew: link every new mocknet host to every host already there, so
	// that DHT lookups can dial anyone they learn about, as on a real
	// network. Without it only the pairs wireSparse connects are linked,
	// and the topology stays exactly as wired.
	linkNew bool
}

func newBenchCluster(b testing.TB, kind string, linkNew bool) *benchCluster {
	c := &benchCluster{kind: kind, linkNew: linkNew}
	switch kind {
	case "loopback":
	case "latency25ms":
		c.mn = mocknet.New()
		c.mn.SetLinkDefaults(mocknet.LinkOptions{Latency: 25 * time.Millisecond})
	default:
		b.Fatalf("unknown cluster kind %q", kind)
	}
	b.Cleanup(func() {
		var wg sync.WaitGroup
		for _, h := range c.hosts {
			wg.Go(func() { _ = h.Close() })
		}
		wg.Wait()
		if c.mn != nil {
			_ = c.mn.Close()
		}
	})
	return c
}

// addHosts starts n hosts in DHT server mode with discovery dialing off, so
// that the topology is what the benchmark wires.
func (c *benchCluster) addHosts(b testing.TB, n int) {
	for range n {
		c.hosts = append(c.hosts, c.newHost(b))
	}
}

// newHost starts one host that the cluster does not own (the caller closes
// it with dropHost, or appends it to hosts).
func (c *benchCluster) newHost(b testing.TB, opts ...p2p.Option) *p2p.Host {
	base := []p2p.Option{
		p2p.Network(benchNetwork),
		p2p.DHTMode("server"),
		p2p.Logger(quietLog),
		p2p.DiscoveryInterval(0),
	}
	if c.mn == nil {
		base = append(base, p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
		h, err := p2p.New(context.Background(), append(base, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	i := c.next
	c.next++
	addr := ma.StringCast(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4242", i>>16&255, i>>8&255, i&255+1))
	lh, err := c.mn.AddPeer(k, addr)
	if err != nil {
		b.Fatal(err)
	}
	if c.linkNew {
		for _, o := range c.hosts {
			if _, err := c.mn.LinkPeers(lh.ID(), o.ID()); err != nil {
				b.Fatal(err)
			}
		}
	}
	h, err := p2p.NewFromHost(context.Background(), lh, append(base, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// dropHost closes a host made by newHost and, on a mocknet, unlinks it, so
// that dials to it fail at once as they would to a closed TCP port.
func (c *benchCluster) dropHost(h *p2p.Host) {
	_ = h.Close()
	if c.mn != nil {
		for _, o := range c.hosts {
			_ = c.mn.UnlinkPeers(h.ID(), o.ID())
		}
	}
}

// wireSparse connects host i to one or two random earlier hosts: a
// connected graph of mean degree ~4, like a young network before discovery
// fills in (the same shape as p2p's gossip benchmark). On a mocknet it
// links the pairs it connects, unless they are linked already.
func (c *benchCluster) wireSparse(b testing.TB) {
	hs := c.hosts
	rng := mrand.New(mrand.NewPCG(1, 2))
	var pairs [][2]*p2p.Host
	for i := 1; i < len(hs); i++ {
		pairs = append(pairs, [2]*p2p.Host{hs[i], hs[rng.IntN(i)]})
		if j := rng.IntN(i); i > 1 && hs[j] != pairs[len(pairs)-1][1] {
			pairs = append(pairs, [2]*p2p.Host{hs[i], hs[j]})
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, p := range pairs {
		if c.mn != nil && len(c.mn.LinksBetweenPeers(p[0].ID(), p[1].ID())) == 0 {
			if _, err := c.mn.LinkPeers(p[0].ID(), p[1].ID()); err != nil {
				b.Fatal(err)
			}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// Retried: on a shared 2-core box handshakes of 100 fresh hosts
			// can time out while their DHTs bootstrap. A failed dial puts
			// the peer in the swarm's dial backoff, which would fail the
			// retry at once, so clear it first.
			var err error
			for try := range 5 {
				if try > 0 {
					if sw, ok := p[0].LibP2P().Network().(*swarm.Swarm); ok {
						sw.Backoff().Clear(p[1].ID())
					}
					time.Sleep(time.Duration(try) * time.Second)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err = p[0].Connect(ctx, addrInfo(p[1]))
				cancel()
				if err == nil {
					return
				}
			}
			b.Error(err)
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

func addrInfo(h *p2p.Host) peer.AddrInfo {
	return peer.AddrInfo{ID: h.ID(), Addrs: h.LibP2P().Addrs()}
}

// startMarkets gives every host a real market following eu offers; they
// stop when the benchmark ends.
func startMarkets(b testing.TB, hs []*p2p.Host) []*Market {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	ms := make([]*Market, len(hs))
	for i, h := range hs {
		ms[i] = NewMarket(h, 1000, []string{"eu"}, quietLog)
		if err := ms[i].Start(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return ms
}

// memState is a StateStore in memory, for tests.
type memState struct {
	mu    sync.Mutex
	state *State
}

func (s *memState) LoadState(v *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != nil {
		*v = *s.state
	}
	return nil
}

func (s *memState) SaveState(v State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = &v
	return nil
}

// newBenchProvider makes m's host a provider the way the node's
// startMarket does, with its state in memory, one simulated RTX 4090,
// region eu/DE and a bronze price. It neither publishes nor serves; the
// caller decides.
func newBenchProvider(b testing.TB, ctx context.Context, m *Market, bronze auction.Credits) *Publisher {
	h := m.host
	store := &memState{}
	key := h.LibP2P().Peerstore().PrivKey(h.ID())
	if key == nil {
		b.Fatal("host has no private key in its peerstore")
	}
	p, err := NewPublisher(ctx, m, store, key, time.Hour, quietLog)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.Update(func(s Settings) (Settings, error) {
		s.Region = auction.Region{Country: "DE", Continent: "eu"}
		s.Prices.Bronze = bronze
		return s, nil
	}); err != nil {
		b.Fatal(err)
	}
	src, err := attest.NewSimulatedSeed("1xRTX4090", h.ID().String())
	if err != nil {
		b.Fatal(err)
	}
	a, _ := attest.NewMonitor(src, p.Limits, nil, 0).Check(ctx)
	if a.Err != "" {
		b.Fatal(a.Err)
	}
	p.SetAvailability(a)
	return p
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(b testing.TB, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitQuiet waits until the process used less than frac of one core over a
// one-second window, or until max has passed. A hundred fresh DHT nodes
// refresh routing tables and provide for a while; measuring during that
// storm measures the 2-core scheduler, not the market.
func waitQuiet(b testing.TB, frac float64, max time.Duration) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		c0 := cpu()
		time.Sleep(time.Second)
		used := cpu() - c0
		if used < time.Duration(frac*float64(time.Second)) {
			return
		}
	}
	b.Logf("process still busy after %v; numbers will be noisy", max)
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// ms is a duration in milliseconds, for benchmark metrics.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
