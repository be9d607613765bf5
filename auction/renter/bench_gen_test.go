package renter

import (
	"math/rand"
	"syscall"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The benchmark book's generator, copied from auction's bench_test.go,
// helpers_test.go and match_bench_test.go, with the same draws in the same
// order, so that the book matches the one BenchmarkRank100k measures.

// traceCC is the compute capability of the trace's models.
var traceCC = map[string]string{
	"H100": "9.0", "H200": "9.0", "A100": "8.0", "L40S": "8.9", "RTX4090": "8.9", "RTX4080": "8.9",
	"RTX6000-Ada": "8.9", "RTX5090": "12.0", "V100": "7.0",
}

var benchDatasets = []string{
	"bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
	"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
	"bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
}

// traceOffer turns a trace row into an offer: half the A100s become
// A100-80GB, idle-time floors are 40-100% of the on-demand price.
func traceOffer(r *rand.Rand, row traceRow, provider string, now int64) *auction.Offer {
	model, vram := row.model, row.vramTotal/row.count
	if model == "A100" {
		model = "A100-40GB"
		if r.Intn(2) == 0 {
			model, vram = "A100-80GB", 81920
		}
	}
	cc := traceCC[row.model]
	if cc == "" {
		cc = "8.6"
	}
	o := &auction.Offer{
		Provider: provider, Network: testNetwork, Seq: 1,
		IssuedAt: now - int64(r.Intn(3600)), ExpiresAt: now + int64(600+r.Intn(3600)),
		Host:   auction.Host{CPUs: 8 * row.count, MemoryMiB: 65536 * row.count},
		Region: auction.Region{Country: row.country, Continent: row.cont},
		Policy: auction.Policy{Workloads: [][]string{{"batch"}, {"service"}, {"batch", "service"}}[r.Intn(3)]},
	}
	o.Windows = randomWindows(r, o.IssuedAt)
	sim := r.Intn(10) == 0
	for i := 0; i < row.count; i++ {
		o.GPUs = append(o.GPUs, auction.GPU{Model: model, VRAMMiB: vram, ComputeCap: cc, Simulated: sim})
	}
	perGPU := row.usdPerHour / float64(row.count) * (0.4 + 0.6*r.Float64())
	o.Prices.Bronze = auction.Credits(perGPU * 1e6)
	if r.Intn(10) < 7 {
		o.Prices.Silver = auction.Credits(perGPU * 1.3e6)
	}
	if r.Intn(10) < 4 {
		o.Prices.Gold = auction.Credits(perGPU * 1.6e6)
	}
	return o
}

// randomWindows are a few nights and weekends from issue on.
func randomWindows(r *rand.Rand, iss int64) []auction.Window {
	var ws []auction.Window
	at := iss - int64(r.Intn(4))*3600
	for len(ws) < 1+r.Intn(6) {
		start := at + int64(r.Intn(12))*3600
		end := start + int64(1+r.Intn(48))*1800
		if start < iss {
			start = iss
		}
		if end > start {
			ws = append(ws, auction.Window{Start: start, End: end})
		}
		at = end + int64(r.Intn(3))*3600 // 0 = touching
	}
	return ws
}

// benchSpec is BenchmarkRank100k's typical bronze job: one mid-range or
// better GPU in Europe or North America, two countries denied, an RTT
// limit and one cached dataset worth preferring.
func benchSpec() *auction.JobSpec {
	return &auction.JobSpec{
		Name: "bench", Image: "registry.example/team/train:1.4",
		Resources: auction.Resources{GPUs: 1, MinVRAMGB: 24, Models: []string{"H100", "A100-80GB", "RTX4090", "L40S", "RTX5090"}, CPUs: 4, MemoryGB: 32},
		Tier:      auction.Bronze, MaxPrice: 1_500_000,
		Duration:  auction.JobDuration{Expected: 2 * time.Hour, Max: 2 * time.Hour},
		Placement: auction.Placement{Regions: []string{"eu", "na"}, DenyCountries: []string{"CN", "RU"}, MaxRTT: 150 * time.Millisecond},
		Datasets:  benchDatasets[:1],
		Workload:  "batch",
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
