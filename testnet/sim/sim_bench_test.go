package sim

import (
	"os"
	"strconv"
	"testing"
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
	o := DefaultOptions()
	o.TracesDir = tracesDir(b)
	o.Supply.Providers = int(envNumber(b, "GLEANER_SIM_PROVIDERS", 100))
	o.Days = envNumber(b, "GLEANER_SIM_DAYS", 0.5)
	o.Demand.Load = envNumber(b, "GLEANER_SIM_LOAD", 0.8)
	s, err := o.loadSupply()
	if err != nil {
		b.Fatal(err)
	}
	d, err := o.loadDemand(s)
	if err != nil {
		b.Fatal(err)
	}
	horizon := int64(o.Days * 86400)
	b.ResetTimer()
	var st Strategy
	var stats MarketStats
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
}

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
