package testnet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
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
		Configure: func(i int, cfg *repo.Config) {
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
	setOffer(t, c, 0, "0.90") // 0.9 credits per GPU-hour = 500 micro-credits per 2 s interval
	prov := c.Nodes()[0].Host().ID().String()
	waitBooks(t, c, 5*time.Second, "the offer", func(b map[string]bool) bool { return b[prov] })

	renter, _ := c.Client(2)
	j := submitJob(t, renter, jobSpec("deadbeat", "bronze", "-sleep", "60s", "-lines", "60"))
	j = waitJob(t, renter, j.ID, func(s string) bool { return s == renting.StateRunning || ended(s) }, time.Minute)
	running := time.Now()
	j = waitJob(t, renter, j.ID, func(s string) bool { return s == renting.StatePaused || ended(s) }, 20*time.Second)
	if j.State != renting.StatePaused {
		t.Fatalf("not paused: %+v", j)
	}
	// Paid for 2 intervals; paused within the third interval's grace (plus
	// the provider's one-second check and the event's trip).
	if took := time.Since(running); took > 2*interval+interval/2+2*time.Second {
		t.Fatalf("paused %v after the job started running; paid for %v", took, 2*interval)
	}
	j = waitJob(t, renter, j.ID, ended, 30*time.Second)
	if j.State != renting.StateFailed || !strings.Contains(j.Error, "no voucher") || j.Vouchers != 2 {
		t.Fatalf("after payment stopped: %+v", j)
	}
	noContainersLeft(t, j.ID)
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
			var s ledger.Settlement
			if json.Unmarshal(e.Payload, &s) == nil && s.Total == 1000 {
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
			bal.Spent == 1000 && bal.Balance == node.FaucetCredits-1000
	})
	// The provider rates the renter by its payment record; the renter sees
	// the provider's hardware claim (journaled at start-up, simulated).
	renterID := c.Nodes()[2].Host().ID().String()
	eventuallyT(t, 10*time.Second, "the provider's record of the renter", func() bool {
		var ev trust.Evidence
		return provider.Call(ctx, "rep_show", node.PeerParamsRep{Peer: renterID}, &ev) == nil && ev.Payments["unpaid"] == 1
	})
	// (The renter's view is cached for 5 s, and its telemetry digest is
	// journaled as the run ends: both are waited for, not raced.)
	var ev trust.Evidence
	eventuallyT(t, 10*time.Second, "the provider's claim, age and telemetry as the renter sees them", func() bool {
		if renter.Call(ctx, "rep_show", node.PeerParamsRep{Peer: prov}, &ev) != nil {
			return false
		}
		tm := ev.Telemetry
		return ev.Claim != nil && ev.Since != nil && tm != nil && tm.Runs == 1
	})
	if !ev.Claim.Simulated || len(ev.Claim.GPUs) != 1 || ev.Claim.GPUs[0].Model != "RTX4090" {
		t.Fatalf("the provider's hardware claim as the renter sees it: %+v", ev.Claim)
	}
	if ev.Since.After(time.Now()) {
		t.Fatalf("the provider's age: %v", ev.Since)
	}
	if tm := ev.Telemetry; tm.Samples == 0 || tm.Rejected != 0 {
		t.Fatalf("the provider's telemetry record: %+v", tm)
	}
}

// TestProviderThatAbandonsAJob: the provider running a job vanishes; the
// renter paid for at most the interval in progress, re-auctions the job,
// and the abandoning provider's score ends below the one that finished it.
func TestProviderThatAbandonsAJob(t *testing.T) {
	waitsApart(t)
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const interval = 2 * time.Second
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 4,
		Configure: func(i int, cfg *repo.Config) {
			if i < 2 {
				cfg.Provider.SimulateGPUs = "1xRTX4090"
			}
		},
		Tune: func(i int, o *node.Options) { o.BillingInterval = interval }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitPeers(t, c, 2, 20*time.Second)
	setOffer(t, c, 0, "0.30")
	setOffer(t, c, 1, "0.50")
	p0, p1 := c.Nodes()[0].Host().ID().String(), c.Nodes()[1].Host().ID().String()
	waitBooks(t, c, 5*time.Second, "both offers", func(b map[string]bool) bool { return b[p0] && b[p1] })

	renter, _ := c.Client(3)
	j := submitJob(t, renter, resumableSpec)
	j = waitJob(t, renter, j.ID, func(s string) bool { return s == renting.StateRunning || ended(s) }, time.Minute)
	waitLog(t, c, 3, j.ID, "step 2/8 done")
	before, _ := jobOf(t, renter, j.ID)
	read := time.Now()
	if err := c.Nodes()[0].Host().Close(); err != nil {
		t.Fatal(err)
	}
	// Vouchers pay one interval ahead from the start request (StartSent,
	// which the first voucher follows; the job runs only once its
	// container has started, later and by how much the machine's load
	// decides): at most the intervals begun by the time they were read.
	if before.Provider != p0 || before.StartSent == nil {
		t.Fatalf("before the provider vanished: provider %s, start sent %v", before.Provider, before.StartSent)
	}
	ran := read.Sub(*before.StartSent)
	if maxV := int(ran/interval) + 1; before.Vouchers > maxV || before.Vouchers < 1 {
		t.Fatalf("before the provider vanished: %d vouchers %v after the start request (at least 1, at most %d)", before.Vouchers, ran, maxV)
	}
	j = waitJob(t, renter, j.ID, ended, 2*time.Minute)
	if j.State != renting.StateCompleted || j.Provider != p1 {
		t.Fatalf("after the provider vanished: %+v", j)
	}
	eventuallyT(t, 20*time.Second, "the abandoning provider scores below the one that finished", func() bool {
		var e0, e1 trust.Evidence
		if renter.Call(ctx, "rep_show", node.PeerParamsRep{Peer: p0}, &e0) != nil || renter.Call(ctx, "rep_show", node.PeerParamsRep{Peer: p1}, &e1) != nil {
			return false
		}
		return e0.Outcomes["abandoned"] == 1 && e0.Score != nil && e1.Score != nil && *e0.Score < *e1.Score
	})
}
