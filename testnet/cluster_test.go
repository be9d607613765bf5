package testnet

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
)

// TestClusterNodesFindEachOtherOverRPC starts full nodes in process and
// checks, through each node's own RPC API, that bootstrap plus DHT discovery
// connect every node to every other, and that the peer-event subscription
// reports a disconnect as it happens.
func TestClusterNodesFindEachOtherOverRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 5
	c, err := NewCluster(ctx, ClusterOptions{Nodes: n})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < n; i++ {
		cl, err := c.Client(i)
		if err != nil {
			t.Fatal(err)
		}
		for {
			var info node.InfoResult
			if err := cl.Call(ctx, "node_info", nil, &info); err != nil {
				t.Fatalf("node %d: node_info: %v", i, err)
			}
			if info.PeerID != c.Nodes()[i].Host().ID().String() || info.Network != "local" {
				t.Fatalf("node %d: node_info = %+v", i, info)
			}
			if info.Peers == n-1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d has %d peers after 30 s, want %d", i, info.Peers, n-1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	cl0, _ := c.Client(0)
	events, err := cl0.Subscribe(ctx, "node_peerEvents", nil)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Nodes()[1].Host().ID().String()
	var ok node.OK
	if err := cl0.Call(ctx, "node_disconnect", node.PeerParams{Peer: victim}, &ok); err != nil || !ok.OK {
		t.Fatalf("node_disconnect: %v %+v", err, ok)
	}
	for {
		select {
		case raw, open := <-events:
			if !open {
				t.Fatal("subscription closed before the disconnect event")
			}
			var ev node.PeerEventResult
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "disconnected" && ev.PeerID == victim {
				return
			}
		case <-ctx.Done():
			t.Fatal("no disconnect event for", victim)
		}
	}
}
