package sim

import (
	"crypto/sha256"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// envNumber reads a benchmark's size from the environment, so that
// `make bench-smoke` runs it small and a measurement runs it at scale:
//
//	GLEANER_SIM_PROVIDERS=10000 GLEANER_SIM_DAYS=7 go test -run '^$' -bench SimMarket -benchtime 1x ./testnet/sim
func envNumber(b *testing.B, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return f
}

// BenchmarkSimMarket is the simulator's speed on the default traces:
// the decentralised market alone (the baselines have their own
// benchmarks), reported as simulated seconds per second, jobs settled per
// second and the gossip each node receives.
func BenchmarkSimMarket(b *testing.B) {
	o, s, d := benchMarket(b, 100, 0.5)
	horizon := int64(o.Days * 86400)
	b.ResetTimer()
	var st Strategy
	var stats MarketStats
	var err error
	for b.Loop() {
		st, stats, err = RunMarket(o.Market, s, d, horizon, nil)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := CheckConservation(s, d, st, horizon); err != nil {
		b.Fatal(err)
	}
	secs := b.Elapsed().Seconds() / float64(b.N)
	nodes := float64(len(s.Providers) + o.Demand.Renters)
	b.ReportMetric(float64(horizon)/secs, "sim-s/s")
	b.ReportMetric(float64(len(d.Jobs))/secs, "jobs/s")
	b.ReportMetric(float64(stats.Rounds)/float64(len(d.Jobs)), "rounds/job")
	b.ReportMetric(float64(st.Messages.GossipBytes)/nodes/float64(horizon)/1000, "gossip-KB/s/node")
	b.ReportMetric(stats.BusiestNodeGossip/1000, "busiest-KB/s")
	b.ReportMetric(float64(len(s.Providers)), "providers")
	b.ReportMetric(float64(len(d.Jobs)), "jobs")
	// The run's digest: a speed-up that keeps it is one that changed no
	// outcome, run, payment or message count (compare before and after).
	// digest-views leaves out how many offers a failed round counted,
	// which the book's views change (TestBookViewsChangeNothing).
	run := fmt.Appendf(nil, "%+v %+v", st, stats)
	b.Logf("digest %x digest-views %x", sha256.Sum256(run), sha256.Sum256(offersKnown.ReplaceAll(run, []byte("offers known"))))
}

var offersKnown = regexp.MustCompile(`[0-9]+ offers known( besides the [0-9]+ this job left)?`)

// BenchmarkSimulateAll is a whole `gleaner sim` run (market, every
// baseline, the bound and its exact check, the report) at a small size.
func BenchmarkSimulateAll(b *testing.B) {
	o := DefaultOptions()
	o.TracesDir = tracesDir(b)
	o.Supply.Providers = 40
	o.Days = 1
	o.Demand.Renters = 20
	for b.Loop() {
		if _, err := Simulate(o, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGangFill is issue 36's comparison: the default traces' jobs
// wider than GLEANER_SIM_GANG_WIDTH GPUs (default 2) run as gangs
// (GangsWiderThan, those the supply can hold, as --gang-width does), in the market, whose renters place a gang member by
// member through renter.Gang, and in central-online, which sees every
// provider and places a gang at once with no rendezvous. It reports both
// gang fills (useful over demanded GPU-hours of the gangs), their ratio,
// the waits to every member running and the GPU-hours lost to gang
// preemption:
//
//	GLEANER_SIM_PROVIDERS=100 GLEANER_SIM_DAYS=1 go test -run '^$' -bench GangFill -benchtime 1x ./testnet/sim
func BenchmarkGangFill(b *testing.B) {
	o, s, base := benchMarket(b, 30, 0.25)
	// As `gleaner sim --gang-width` does: a gang the supply could never
	// hold stays whole.
	d := gangsOf(base, int(envNumber(b, "GLEANER_SIM_GANG_WIDTH", 2)), s)
	gangs := 0
	for i := range d.Jobs {
		if d.Jobs[i].Gang() {
			gangs++
		}
	}
	if gangs == 0 {
		b.Fatal("no job became a gang")
	}
	mk, co := marketAndCentral(b, o, s, d)
	gm, gc := gangMetrics(d, mk), gangMetrics(d, co)
	b.ReportMetric(float64(gangs), "gangs")
	b.ReportMetric(float64(gm.Placed), "market-placed")
	b.ReportMetric(float64(gc.Placed), "central-placed")
	b.ReportMetric(gm.FillShare, "market-fill")
	b.ReportMetric(gc.FillShare, "central-fill")
	b.ReportMetric(shareOf(gm.FillShare, gc.FillShare), "fill-ratio")
	b.ReportMetric(float64(gm.WaitP50Sec), "market-wait-p50-s")
	b.ReportMetric(float64(gc.WaitP50Sec), "central-wait-p50-s")
	b.ReportMetric(float64(gm.WaitP95Sec), "market-wait-p95-s")
	b.ReportMetric(float64(gc.WaitP95Sec), "central-wait-p95-s")
	b.ReportMetric(gm.PreemptionLostGPUHours, "market-lost-GPU-h")
	b.ReportMetric(gc.PreemptionLostGPUHours, "central-lost-GPU-h")
}

// BenchmarkArrayMakespan measures job arrays (issue 36): the sampled
// trace's silver and bronze batch jobs longer than an hour split into
// GLEANER_SIM_ARRAY_SHARDS shards (default 8), at most
// GLEANER_SIM_ARRAY_PARALLEL (default 4) at once (ArraysLongerThan), in
// the market, whose renters place each shard through renter.Array, and
// in central-online, which releases the shards as max_parallel allows.
// It reports each array's makespan (submit to its last shard's end)
// over the market's and central-online's, p50 and p95 over the arrays
// both completed, and each strategy's makespan over the ideal:
//
//	GLEANER_SIM_PROVIDERS=100 GLEANER_SIM_DAYS=2 go test -run '^$' -bench ArrayMakespan -benchtime 1x ./testnet/sim
func BenchmarkArrayMakespan(b *testing.B) {
	o, s, base := benchMarket(b, 30, 1) // a quarter day completes no array of hour-long jobs split
	rows, arrays := ArraysLongerThan(base, int(envNumber(b, "GLEANER_SIM_ARRAY_SHARDS", 8)), int(envNumber(b, "GLEANER_SIM_ARRAY_PARALLEL", 4)), ArraySplitOver)
	if arrays == 0 {
		b.Fatal("no job became an array")
	}
	d, _ := ExpandArrays(rows)
	mk, co := marketAndCentral(b, o, s, d)
	am, ac := arrayMetrics(d, mk), arrayMetrics(d, co)
	ratios := ArrayMakespanRatios(d, mk, co)
	b.ReportMetric(float64(arrays), "arrays")
	b.ReportMetric(float64(am.Completed), "market-completed")
	b.ReportMetric(float64(ac.Completed), "central-completed")
	b.ReportMetric(float64(len(ratios)), "both-completed")
	b.ReportMetric(nearestRank(ratios, 50), "makespan-ratio-p50")
	b.ReportMetric(nearestRank(ratios, 95), "makespan-ratio-p95")
	b.ReportMetric(am.OverIdealP50, "market-over-ideal-p50")
	b.ReportMetric(am.OverIdealP95, "market-over-ideal-p95")
	b.ReportMetric(ac.OverIdealP50, "central-over-ideal-p50")
	b.ReportMetric(ac.OverIdealP95, "central-over-ideal-p95")
}

// marketAndCentral runs the market and central-online on the same supply
// and demand, timed in b's loop, and checks that each conserved every
// GPU-second.
func marketAndCentral(b *testing.B, o Options, s *Supply, d *Demand) (mk, co Strategy) {
	b.Helper()
	horizon := int64(o.Days * 86400)
	mc := o.Market
	bo := BaselineOptions{Seed: o.Seed, Horizon: horizon, Retry: int64(mc.Retry / time.Second), Patience: int64(mc.Patience / time.Second),
		CheckpointSec: int64(mc.Checkpoint / time.Second), Notice: int64(mc.Notice / time.Second)}
	var err error
	for b.Loop() {
		if mk, _, err = RunMarket(o.Market, s, d, horizon, nil); err != nil {
			b.Fatal(err)
		}
		if co, err = RunBaseline(BaselineCentralOnline, s, d, bo); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, st := range []Strategy{mk, co} {
		if err := CheckConservation(s, d, st, horizon); err != nil {
			b.Fatal(err)
		}
	}
	return mk, co
}

// benchMarket is the default options on the repository's traces, sized
// by GLEANER_SIM_PROVIDERS (default providers), GLEANER_SIM_DAYS (days)
// and GLEANER_SIM_LOAD (0.8), with their supply and demand loaded.
func benchMarket(b *testing.B, providers int, days float64) (Options, *Supply, *Demand) {
	b.Helper()
	o := DefaultOptions()
	o.TracesDir = tracesDir(b)
	o.Supply.Providers = int(envNumber(b, "GLEANER_SIM_PROVIDERS", float64(providers)))
	o.Days = envNumber(b, "GLEANER_SIM_DAYS", days)
	o.Demand.Load = envNumber(b, "GLEANER_SIM_LOAD", 0.8)
	s, err := o.loadSupply()
	if err != nil {
		b.Fatal(err)
	}
	d, err := o.loadDemand(s)
	if err != nil {
		b.Fatal(err)
	}
	return o, s, d
}
