package p2p

import (
	"context"
	"sync"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestCluster20 runs twenty real TCP hosts on loopback, each bootstrapped
// from one or two earlier nodes only, with the discovery loop on. Every node
// must find all others as providers of CapabilityCID("node","any") through
// the DHT, and one gossip message must reach all twenty.
func TestCluster20(t *testing.T) {
	if testing.Short() {
		t.Skip("20-node cluster")
	}
	const n = 20
	hs := make([]*Host, n)
	for i := range hs {
		var boot []peer.AddrInfo
		if i > 0 {
			boot = append(boot, info(hs[i-1]))
		}
		if i > 2 {
			boot = append(boot, info(hs[i/2]))
		}
		// low watermark 4: discovery dials a few peers, not a full mesh,
		// so reaching everyone still depends on the DHT and gossip hops.
		hs[i] = newTestHost(t, "cluster", Bootstrap(boot...), ConnLimits(4, 8),
			DiscoveryInterval(2*time.Second))
	}
	key := hs[0].CapabilityCID("node", "any")
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for _, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(40 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				found, _ := h.FindProviders(ctx, key, 0)
				cancel()
				if len(found) == n-1 {
					return
				}
				if time.Now().After(deadline) {
					errs <- h.ID().String()
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for id := range errs {
		t.Errorf("node %s did not find all %d others via the DHT", id, n-1)
	}

	tps := make([]*pubsub.Topic, n)
	got := make([]chan []byte, n)
	for i, h := range hs {
		var err error
		if tps[i], err = h.Join("cluster/1", nil, 1024); err != nil {
			t.Fatal(err)
		}
		sub, err := tps[i].Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		got[i] = make(chan []byte, 1)
		go func() {
			if m, err := sub.Next(context.Background()); err == nil {
				got[i] <- m.Data
			}
		}()
	}
	name := hs[0].TopicName("cluster/1")
	eventually(t, 15*time.Second, "every node has a topic peer", func() bool {
		for _, h := range hs {
			if len(h.PubSub().ListPeers(name)) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(1500 * time.Millisecond) // let one heartbeat graft meshes
	if err := tps[7].Publish(context.Background(), []byte("hello cluster")); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for i := range got {
		select {
		case m := <-got[i]:
			if string(m) != "hello cluster" {
				t.Fatalf("node %d got %q", i, m)
			}
		case <-timeout:
			t.Fatalf("node %d did not receive the gossip message", i)
		}
	}
}
