package testnet

import (
	"context"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
)

func TestZZReproReleaseLag(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 3, Configure: func(i int, cfg *node.Config) {
		if i == 0 {
			cfg.Provider.SimulateGPUs = "1xRTX4090"
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitPeers(t, c, 2, 20*time.Second)
	setOffer(t, c, 0, "0.40")
	prov := c.Nodes()[0].Host().ID().String()
	waitBooks(t, c, 5*time.Second, "offer", func(b map[string]bool) bool { return b[prov] })
	renter, _ := c.Client(2)
	for k := 0; k < 3; k++ {
		var j node.JobRecord
		if err := renter.Call(ctx, "job_submit", node.JobSubmitParams{Spec: jobSpec("a", "bronze", "-sleep", "0", "-lines", "0")}, &j); err != nil {
			t.Fatal(err)
		}
		for {
			_ = renter.Call(ctx, "job_status", node.JobIDParams{ID: j.ID}, &j)
			if j.State == node.StateCompleted || j.State == node.StateFailed || j.State == node.StateNoMatch {
				break
			}
			time.Sleep(time.Millisecond)
		}
		var ex node.JobExplain
		_ = renter.Call(ctx, "job_explain", node.JobIDParams{ID: j.ID}, &ex)
		t.Logf("job %d: %s %s quotes %+v", k, j.State, j.Error, ex.Quotes)
	}
}
