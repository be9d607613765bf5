package testnet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
)

// TestRenterThatStopsPayingIsPausedThenStopped: with a 2 s billing
// interval, a renter pays two intervals and stops. The provider pauses the
// container once the paid time plus the grace has run out, stops the job
// when its patience runs out, and settles for what was paid: it worked at
// most one interval unpaid.
func TestRenterThatStopsPayingIsPausedThenStopped(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const interval = 2 * time.Second
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 3,
		Configure: func(i int, cfg *node.Config) {
			if i == 0 {
				cfg.Provider.SimulateGPUs = "1xRTX4090"
			}
		},
		Tune: func(i int, o *node.Options) {
			o.BillingInterval = interval
			if i == 2 {
				o.StopPayingAfter = 2
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitPeers(t, c, 2, 20*time.Second)
	setOffer(t, c, 0, "0.90") // 0.9 credits per GPU-hour = 0.0005 per 2 s interval
	prov := c.Nodes()[0].Host().ID().String()
	waitBooks(t, c, 5*time.Second, "the offer", func(b map[string]bool) bool { return b[prov] })

	renter, _ := c.Client(2)
	j := submitJob(t, renter, jobSpec("deadbeat", "bronze", "-sleep", "60s", "-lines", "60"))
	j = waitJob(t, renter, j.ID, func(s string) bool { return s == node.StateRunning || ended(s) }, time.Minute)
	running := time.Now()
	j = waitJob(t, renter, j.ID, func(s string) bool { return s == node.StatePaused || ended(s) }, 20*time.Second)
	if j.State != node.StatePaused {
		t.Fatalf("not paused: %+v", j)
	}
	// Paid for 2 intervals; paused within the third interval's grace (plus
	// the provider's one-second check and the event's trip).
	if took := time.Since(running); took > 2*interval+interval/2+2*time.Second {
		t.Fatalf("paused %v after the job started running; paid for %v", took, 2*interval)
	}
	j = waitJob(t, renter, j.ID, ended, 30*time.Second)
	if j.State != node.StateFailed || !strings.Contains(j.Error, "no voucher") || j.Vouchers != 2 {
		t.Fatalf("after payment stopped: %+v", j)
	}
	if left := managedContainers(t, j.ID); left != "" {
		t.Fatalf("containers left behind:\n%s", left)
	}
	// The provider settled for exactly the two vouchers.
	provider, _ := c.Client(0)
	eventuallyT(t, 10*time.Second, "a settlement in the provider's feed", func() bool {
		var hist []node.EntryView
		if provider.Call(ctx, "ledger_history", nil, &hist) != nil {
			return false
		}
		for _, e := range hist {
			if e.Type != "settlement" {
				continue
			}
			var s node.Settlement
			if json.Unmarshal(e.Payload, &s) == nil && s.Total > 0.00099 && s.Total < 0.00101 {
				return true
			}
		}
		return false
	})
	// The settlement replicates to the renter, whose balance shows exactly
	// the two vouchers spent.
	eventuallyT(t, 10*time.Second, "the renter's balance", func() bool {
		var bal node.BalanceResult
		return renter.Call(ctx, "ledger_balance", nil, &bal) == nil &&
			bal.Spent > 0.00099 && bal.Spent < 0.00101 && bal.Balance == node.FaucetCredits-bal.Spent
	})
}
