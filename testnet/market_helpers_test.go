package testnet

import (
	"context"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// price is one provider's bronze and silver floors ("" = tier not offered).
type price struct{ bronze, silver string }

// marketCluster starts nodes of which the first len(prices) each sell one
// simulated RTX4090 at those prices, and waits until every book holds
// every offer.
func marketCluster(t *testing.T, ctx context.Context, nodes int, prices ...price) *Cluster {
	t.Helper()
	c, err := NewCluster(ctx, ClusterOptions{Nodes: nodes, Configure: func(i int, cfg *repo.Config) {
		if i < len(prices) {
			cfg.Provider.SimulateGPUs = "1xRTX4090"
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitPeers(t, c, 2, 20*time.Second)
	want := map[string]uint64{}
	for i, p := range prices {
		cl, _ := c.Client(i)
		patch := offers.Patch{Region: strPtr("eu/DE"), PriceBronze: strPtr(p.bronze)}
		if p.silver != "" {
			patch.PriceSilver = strPtr(p.silver)
		}
		var res node.OfferShowResult
		if err := cl.Call(ctx, "offer_set", patch, &res); err != nil || !res.Offered {
			t.Fatalf("node %d offer_set: %v (%s)", i, err, res.Reason)
		}
		want[res.Offer.Provider] = res.Offer.Seq
	}
	waitBooks(t, c, 5*time.Second, "every offer", func(b map[string]bool) bool {
		for p := range want {
			if !b[p] {
				return false
			}
		}
		return true
	})
	return c
}

func strPtr(s string) *string { return &s }

// submitJob submits a spec through a renter's RPC.
func submitJob(t *testing.T, cl *rpc.Client, spec string) renting.JobRecord {
	t.Helper()
	var j renting.JobRecord
	if err := cl.Call(context.Background(), "job_submit", node.JobSubmitParams{Spec: spec}, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func ended(s string) bool {
	return s == renting.StateCompleted || s == renting.StateFailed || s == renting.StateNoMatch
}
