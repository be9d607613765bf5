package auction

import (
	"math/rand"
	"runtime"
	"testing"
	"time"
)

// benchSpec is a typical renter's bronze job: one mid-range or better GPU
// in Europe or North America, data residency excluding two countries, an
// RTT limit and one cached dataset worth preferring.
func benchSpec() *JobSpec {
	return &JobSpec{
		Name: "bench", Image: "registry.example/team/train:1.4",
		Resources: Resources{GPUs: 1, MinVRAMGB: 24, Models: []string{"H100", "A100-80GB", "RTX4090", "L40S", "RTX5090"}, CPUs: 4, MemoryGB: 32},
		Tier:      Bronze, MaxPrice: 1_500_000,
		Duration:  JobDuration{Expected: 2 * time.Hour, Max: 2 * time.Hour},
		Placement: Placement{Regions: []string{"eu", "na"}, DenyCountries: []string{"CN", "RU"}, MaxRTT: 150 * time.Millisecond},
		Datasets:  testDatasets[:1],
		Workload:  "batch",
	}
}

// BenchmarkRank100k times one auction's matching over a full book:
// feasibility over 100,000 trace-derived offers, then admission, scoring
// and ranking of a bid from every feasible provider (each bidding its
// bronze floor, the dominant strategy), then clearing. Bids are built in
// setup, as they would arrive over the network; collecting them per
// feasible offer is timed.
func BenchmarkRank100k(b *testing.B) {
	rows := loadTrace(b)
	const n = 100_000
	r := rand.New(rand.NewSource(1))
	now := time.Unix(t0.Unix(), 0)
	offers := make([]*Offer, n)
	byProv := make(map[string]*Offer, n)
	bidBy := make(map[string]Bid, n)
	rtt, rep := fixedRTT{}, mapRep{}
	for i := range offers {
		o := traceOffer(r, rows[r.Intn(len(rows))], fakeID(uint64(i)), now.Unix())
		for _, d := range testDatasets {
			if r.Intn(4) == 0 {
				o.Datasets = append(o.Datasets, d)
			}
		}
		if err := o.Validate(); err != nil {
			b.Fatal(err)
		}
		offers[i], byProv[o.Provider] = o, o
		if r.Intn(10) < 7 { // measured peers; the rest are unmeasured
			rtt[o.Provider] = time.Duration(5+r.Intn(250)) * time.Millisecond
		}
		rep[o.Provider] = r.Float64()
		if o.Prices.Bronze > 0 {
			bidBy[o.Provider] = Bid{Provider: o.Provider, JobID: "job", Tier: Bronze, Price: o.Prices.Bronze,
				GPUs: 1, ValidUntil: now.Unix() + 120, Nonce: []byte("12345678")}
		}
	}
	spec, env := benchSpec(), Env{Now: now, RTT: rtt.rtt, Reputation: rep}
	var feasible, ranked int
	runtime.GC()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		ok, _ := Feasible(spec, offers, env)
		bids := make([]Bid, 0, len(ok))
		for _, o := range ok {
			bids = append(bids, bidBy[o.Provider])
		}
		rs := Rank(spec, bids, byProv, env)
		if _, _, cleared := Clear(rs, spec.MaxPrice); !cleared {
			b.Fatal("nothing cleared")
		}
		feasible, ranked = len(ok), len(rs)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(feasible), "feasible")
	b.ReportMetric(float64(ranked), "ranked")
}
