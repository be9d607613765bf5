package testnet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// BenchmarkGangStart: the time from job_submit to every member of a
// 4-member gang running, against one job's submit to running in the same
// run, on the same four providers of one simulated GPU each and a renter,
// in this process. A gang's members are awarded together, in parallel
// rounds over disjoint shares of the book, and started together once all
// hold an award, so its start is about one round's award plus one start.
// Needs Docker.
//
//	go test -run '^$' -bench GangStart -benchtime 3x ./testnet
func BenchmarkGangStart(b *testing.B) {
	const providers = 4
	requireDocker(b)
	c, rc, ctx := benchOfferedMarket(b, providers, "1xH100")
	status := func(id string) renting.JobRecord {
		var j renting.JobRecord
		if err := rc.Call(ctx, "job_status", node.JobIDParams{ID: id}, &j); err != nil {
			b.Fatal(err)
		}
		return j
	}
	// until polls id until done says so, then cancels it and waits for
	// its end (every GPU free again for the next run).
	until := func(id, what string, done func(renting.JobRecord) bool) time.Duration {
		start := status(id).Created
		var at time.Time
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%s %s: not %s in 3 minutes", what, id, what)
			}
			j := status(id)
			if renting.Terminal(j.State) {
				b.Fatalf("%s %s ended %s (%s) before running", what, id, j.State, j.Error)
			}
			if done(j) {
				at = time.Now()
				break
			}
		}
		if err := rc.Call(ctx, "job_cancel", node.JobIDParams{ID: id}, nil); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); !renting.Terminal(status(id).State); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%s %s: not ended a minute after its cancel", what, id)
			}
		}
		return at.Sub(start)
	}
	one := jobSpec("one", "bronze", "-sleep", "5m", "-lines", "1")
	gang := jobSpec("gang", "bronze", "-sleep", "5m", "-lines", "1") + fmt.Sprintf("gang: {members: %d}\n", providers)
	var oneT, gangT time.Duration
	b.ResetTimer()
	for range b.N {
		var j renting.JobRecord
		if err := rc.Call(ctx, "job_submit", node.JobSubmitParams{Spec: one}, &j); err != nil {
			b.Fatal(err)
		}
		oneT += until(j.ID, "running", func(j renting.JobRecord) bool { return j.State == renting.StateRunning })
		// The cancelled job's provider publishes its GPU free again; the
		// gang needs all four.
		waitProvidersFree(b, ctx, c, rc, providers)
		if err := rc.Call(ctx, "job_submit", node.JobSubmitParams{Spec: gang}, &j); err != nil {
			b.Fatal(err)
		}
		gangT += until(j.ID, "running", func(j renting.JobRecord) bool {
			if j.GangView == nil || len(j.GangView.MemberJobs) != providers {
				return false
			}
			for _, m := range j.GangView.MemberJobs {
				if m.State != renting.StateRunning {
					return false
				}
			}
			return true
		})
		waitProvidersFree(b, ctx, c, rc, providers)
	}
	b.StopTimer()
	b.ReportMetric(oneT.Seconds()/float64(b.N), "one-job-s")
	b.ReportMetric(gangT.Seconds()/float64(b.N), "gang4-s")
	b.ReportMetric(float64(gangT)/float64(oneT), "x-one-job")
}

// waitProvidersFree waits until none of the n providers holds a lease
// any more and the renter's book shows each with a free GPU again.
func waitProvidersFree(b *testing.B, ctx context.Context, c *Cluster, rc *rpc.Client, n int) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		busy := 0
		for i := range n {
			cl, err := c.Client(i)
			if err != nil {
				b.Fatal(err)
			}
			var ls []node.LeaseView
			if err := cl.Call(ctx, "lease_list", struct{}{}, &ls); err != nil {
				b.Fatal(err)
			}
			for _, l := range ls {
				if l.Active {
					busy++
				}
			}
		}
		var res node.MarketOffersResult
		if err := rc.Call(ctx, "market_offers", node.MarketOffersParams{Query: "free>=1h", Limit: 1000}, &res); err != nil {
			b.Fatal(err)
		}
		if busy == 0 && len(res.Offers) >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("a minute after the cancel: %d leases held, %d of %d providers free in the book", busy, len(res.Offers), n)
		}
	}
}
