package testnet

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
)

// burstJobs is the burst of the market-core issue: 40 jobs at once from the
// 15 renters onto 5 providers with 8 GPUs each (40 GPUs in all).
const burstJobs = 40

// burstRenters spreads burstJobs over the renters, two or three each.
func (m *benchMarket) burstRenters() []int { return spreadJobs(m.renters, burstJobs) }

// spreadJobs is n jobs' renters, dealt over renters in turn.
func spreadJobs(renters []int, n int) []int {
	out := make([]int, n)
	for k := range out {
		out[k] = renters[k%len(renters)]
	}
	return out
}

// TestBurstOf40JobsAllGetLeases: when 40 jobs arrive at once for 40 free
// GPUs, every one gets a lease. A job whose bid's GPUs went to another
// award asks for quotes again at once instead of ending no-match, and
// concurrent quotes name different free GPUs, so collisions are rare.
func TestBurstOf40JobsAllGetLeases(t *testing.T) {
	m := newBenchMarketLinks(t, 0)
	samples := m.round(t, renting.StateLeased, m.burstRenters()) // fatal on any job that is not leased
	if len(samples) != burstJobs {
		t.Fatalf("%d samples", len(samples))
	}
	var lat []time.Duration
	for _, s := range samples {
		lat = append(lat, s.node)
	}
	t.Logf("40 jobs at once: submit to lease p50 %v, p95 %v", percentile(lat, 0.5), percentile(lat, 0.95))
	m.drain(t)
}

// BenchmarkBurstSubmitToLease: rounds of 40 jobs at once onto 40 free
// GPUs, each round after the last has drained: p50 and p95 of submit to
// lease over every job, and the awards refused by a race (rebids/op).
func BenchmarkBurstSubmitToLease(b *testing.B) { benchBurst(b, false) }

// BenchmarkBurstEqualFloors is the burst where every provider asks the
// same floor (owners who keep the default price): without a draw per
// renter and round, every renter awards the provider with the lowest ID
// first and most awards race.
//
//	go test -run '^$' -bench BurstEqualFloors -benchtime 3x ./testnet
func BenchmarkBurstEqualFloors(b *testing.B) { benchBurst(b, true) }

func benchBurst(b *testing.B, equalFloors bool) {
	m := newBenchMarketFloors(b, 0, equalFloors)
	var lat []time.Duration
	rebids := 0
	b.ResetTimer()
	for range b.N {
		for _, s := range m.round(b, renting.StateLeased, m.burstRenters()) {
			lat = append(lat, s.node)
			rebids += s.rebids
		}
		b.StopTimer()
		m.drain(b)
		b.StartTimer()
	}
	b.ReportMetric(ms(percentile(lat, 0.50)), "node-p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.95)), "node-p95-ms")
	b.ReportMetric(float64(rebids)/float64(b.N), "rebids/op")
}
