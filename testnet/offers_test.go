package testnet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// providerEvery marks every third node a provider with simulated GPUs.
func providerEvery(k int) func(int, *repo.Config) {
	return func(i int, cfg *repo.Config) {
		if i%k == 0 {
			cfg.Provider.SimulateGPUs = "2xRTX4090"
		}
	}
}

func setOffer(t testing.TB, c *Cluster, i int, bronze string) {
	t.Helper()
	cl, err := c.Client(i)
	if err != nil {
		t.Fatal(err)
	}
	offerOn(t, cl, i, bronze)
}

// offerOn sells node i's GPUs in eu/DE at a bronze price, through its RPC.
func offerOn(t testing.TB, cl *rpc.Client, i int, bronze string) {
	t.Helper()
	region, price := "eu/DE", bronze
	var res node.OfferShowResult
	if err := cl.Call(context.Background(), "offer_set", offers.Patch{Region: &region, PriceBronze: &price}, &res); err != nil {
		t.Fatalf("node %d offer_set: %v", i, err)
	}
	if !res.Offered {
		t.Fatalf("node %d not offered: %s", i, res.Reason)
	}
}

// bookOf returns the providers in node i's book.
func bookOf(t testing.TB, c *Cluster, i int, query string) map[string]bool {
	t.Helper()
	cl, err := c.Client(i)
	if err != nil {
		t.Fatal(err)
	}
	return bookOn(t, cl, i, query)
}

// bookOn returns the providers in a node's book, through its RPC.
func bookOn(t testing.TB, cl *rpc.Client, i int, query string) map[string]bool {
	t.Helper()
	var res node.MarketOffersResult
	if err := cl.Call(context.Background(), "market_offers", node.MarketOffersParams{Query: query, Limit: 1000}, &res); err != nil {
		t.Fatalf("node %d market_offers: %v", i, err)
	}
	out := map[string]bool{}
	for _, o := range res.Offers {
		out[o.Provider] = true
	}
	return out
}

// waitBooks polls every node until want(book) holds for all, or fails
// after limit and names the nodes that lag.
func waitBooks(t *testing.T, c *Cluster, limit time.Duration, what string, want func(map[string]bool) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var lag []int
		for i := range c.Nodes() {
			if !want(bookOf(t, c, i, "")) {
				lag = append(lag, i)
			}
		}
		if len(lag) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: nodes %v not there after %v", what, lag, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOffersReachEveryBookAndLateJoinersFindThemInTheDHT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 30, Fanout: 2, Configure: providerEvery(3)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Let the gossip mesh form before measuring propagation.
	waitPeers(t, c, 2, 20*time.Second)

	providers := map[string]bool{}
	for i := 0; i < 30; i += 3 {
		setOffer(t, c, i, fmt.Sprintf("0.%d5", i/3))
		providers[c.Nodes()[i].Host().ID().String()] = true
	}
	// The bounds here are for liveness over gossip on a loaded machine;
	// the propagation time itself is measured by BenchmarkOfferPropagation
	// (node/offers) and BenchmarkGossipPropagation (p2p).
	took := waitBooks(t, c, 30*time.Second, "10 offers in every book", func(b map[string]bool) bool {
		return len(b) == 10 && subset(providers, b)
	})
	t.Logf("all 10 offers in all 30 books after %v", took)

	late, err := c.Add(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		if b := bookOf(t, c, 30, ""); len(b) == 10 && subset(providers, b) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("late joiner %s has %v after 10 s, want all 10 providers", late.Host().ID(), bookOf(t, c, 30, ""))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("late joiner found all 10 offers through the DHT in %v", time.Since(start))

	// A pause publishes a signed withdrawal that reaches every book.
	cl0, _ := c.Client(0)
	var res node.OfferShowResult
	if err := cl0.Call(ctx, "offer_pause", nil, &res); err != nil || res.Offered {
		t.Fatalf("offer_pause: %v, offered=%v", err, res.Offered)
	}
	gone := c.Nodes()[0].Host().ID().String()
	waitBooks(t, c, 30*time.Second, "withdrawal in every book", func(b map[string]bool) bool { return !b[gone] && len(b) == 9 })
	if err := cl0.Call(ctx, "offer_resume", nil, &res); err != nil || !res.Offered {
		t.Fatalf("offer_resume: %v, offered=%v (%s)", err, res.Offered, res.Reason)
	}
	waitBooks(t, c, 30*time.Second, "resumed offer in every book", func(b map[string]bool) bool { return b[gone] && len(b) == 10 })
}

func waitPeers(t testing.TB, c *Cluster, min int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for i, n := range c.Nodes() {
		for len(n.Host().Peers()) < min {
			if time.Now().After(deadline) {
				t.Fatalf("node %d has %d peers", i, len(n.Host().Peers()))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func TestAnOfferThatIsNotRenewedExpiresFromEveryBook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 4, OfferTTL: 3 * time.Second, Configure: providerEvery(4)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitPeers(t, c, 3, 20*time.Second)
	setOffer(t, c, 0, "0.5")
	prov := c.Nodes()[0].Host().ID().String()
	waitBooks(t, c, 30*time.Second, "offer everywhere", func(b map[string]bool) bool { return b[prov] })
	// Cut the provider off the network without a withdrawal, as a crash
	// or a pulled cable would: its offer must age out on its own.
	if err := c.Nodes()[0].Host().Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 1; i < 4; i++ {
		for bookOf(t, c, i, "")[prov] {
			if time.Since(start) > 6*time.Second {
				t.Fatalf("node %d still lists the offer 6 s after its provider vanished (TTL 3 s)", i)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
