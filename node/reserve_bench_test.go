package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
)

// BenchmarkReservedStartDelay measures, on real daemons (libp2p on
// loopback, bbolt, Docker), how late a gold reservation's job starts
// against its start: each iteration reserves 8 jobs, one per simulated
// GPU, for starts 12 s ahead spread over 4 s, and reads when each began
// to run (the provider's "running" event). Reports p50 and p95 of the
// distance from the start in ms (the target is under 2 s), and how early
// the earliest began.
func BenchmarkReservedStartDelay(b *testing.B) {
	requireDemoImage(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const gpus = 8
	prov := startTestNode(b, ctx, fmt.Sprintf("%dxRTX4090", gpus), Options{})
	if _, err := prov.provider.Update(func(s offers.Settings) (offers.Settings, error) {
		s.Region = auction.Region{Country: "DE", Continent: "eu"}
		s.Prices.Gold = 1_000_000
		return s, nil
	}); err != nil {
		b.Fatal(err)
	}
	prov.provider.Poke()
	rn := startTestNode(b, ctx, "", Options{})
	if err := rn.Host().LibP2P().Connect(ctx, addrInfo(prov.Host())); err != nil {
		b.Fatal(err)
	}
	waitFor(b, 30*time.Second, "the provider's offer in the renter's book", func() bool {
		o, _, ok := rn.market.Book().Get(prov.Host().ID().String())
		return ok && len(o.GPUs) == gpus
	})
	var delays []time.Duration
	b.ResetTimer()
	for b.Loop() {
		base := time.Now().Add(12 * time.Second).Truncate(time.Second)
		var ids []string
		for i := range gpus {
			start := base.Add(time.Duration(i/2) * time.Second).UTC().Format(time.RFC3339)
			j, err := rn.renterJobs.Submit([]byte(goldSpec(fmt.Sprint("r", i), start, "1s")), nil, renting.SubmitOptions{})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		for _, id := range ids {
			deadline := time.Now().Add(time.Minute)
			for {
				j, err := rn.renterJobs.Get(id)
				if err != nil {
					b.Fatal(err)
				}
				if j.StartedAt != nil && j.Reserved != nil {
					delays = append(delays, j.StartedAt.Sub(*j.Reserved))
					break
				}
				if renting.Terminal(j.State) || time.Now().After(deadline) {
					b.Fatalf("reservation %s: %s (%s)", id, j.State, j.Error)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		for _, id := range ids { // let the jobs end before the next round
			deadline := time.Now().Add(time.Minute)
			for j, _ := rn.renterJobs.Get(id); !renting.Terminal(j.State) && time.Now().Before(deadline); j, _ = rn.renterJobs.Get(id) {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	// A reservation launches a container's start before its window (the
	// provider's launch lead), so a job may run a little early: the
	// percentiles are of the distance from the start, either way.
	slices.Sort(delays)
	early := max(-delays[0], 0)
	off := make([]time.Duration, len(delays))
	for i, d := range delays {
		off[i] = max(d, -d)
	}
	slices.Sort(off)
	at := func(p float64) time.Duration { return off[min(len(off)-1, int(p*float64(len(off))))] }
	b.ReportMetric(float64(at(0.5))/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(at(0.95))/float64(time.Millisecond), "p95-ms")
	b.ReportMetric(float64(early)/float64(time.Millisecond), "earliest-ms")
	if early > sched.MaxLaunchLead {
		b.Errorf("a reservation started %v before its start, more than the launch lead's bound", early)
	}
}
