package testnet

// BenchmarkCentralBroker: the price of decentralisation, measured in one
// run on one cluster (issue 33). The 20-node cluster of
// BenchmarkSubmitToLease (5 providers x 8 simulated H100, distinct
// floors) places the same jobs two ways, in alternation, each round
// drained before the next:
//
//   - market: job_submit on a renter node, which runs its own auction
//     (quotes from up to 5 providers, award), as BenchmarkSubmitToLease
//     measures it;
//   - broker: the renter node sends the job over libp2p to one node of
//     the same cluster acting as a central broker (central_broker_test.go),
//     which quotes the one provider it picked and awards, and answers
//     with the lease; the broker then runs the job, so that both ways
//     start the same containers and drain the same way;
//   - durable broker: the same broker, which also commits the job when it
//     arrives and its lease before it answers (brokerRequest.Durable), as
//     the market's renter commits its job record at job_submit and its
//     lease before the leased state: the two fsyncs a central scheduler
//     that survives its own restart makes too.
//
// Every iteration runs one round of each (each way first on every third
// iteration), with the same renters, the same spec and the same drain;
// the broker node takes no part as a renter.
// Latencies are submit-to-lease:
//
//   - market-*: the renter node's own clock, from the job record's
//     Created (job_submit handled) to the leased state's event (the
//     node-ms of BenchmarkSubmitToLease): its node, not the RPC client;
//     market-client-*: the RPC client's, for reference;
//   - broker-*: from the renter node opening its stream to the broker to
//     reading the verified lease, on the renter node's host;
//     broker-place-*: the broker's own time per placement (quote, award,
//     checks), without its wait for the placements ahead of it: the
//     broker places one job at a time, so with 10 at once most of a
//     job's wait is the queue.
//
// p50-ratio-N and p95-ratio-N are market / broker for N jobs at once
// (1, 10, and 40 in the burst, BenchmarkBurstSubmitToLease's round of 40
// jobs from 14 renters onto all 40 GPUs), p50-ratio-durable-N and
// p95-ratio-durable-N market / durable broker; the targets are
// p95-ratio-1 <= 1.2 and p95-ratio-10 <= 1.5 (against the broker that
// writes nothing, the stricter). The issue sets the burst an absolute
// target (p95 at most 1 s), no ratio; its ratio is logged against 1.5,
// as for 10 at once. A missed target is logged, not failed: the numbers
// depend on the machine.
//
//	go test -run '^$' -bench 'CentralBroker' -benchtime 20x -timeout 30m ./testnet

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// brokerNode is the cluster node that acts as the broker: a renter node
// (it sells nothing), left out of both ways' renters.
const brokerNode = benchJobNodes - 1

// versus is a benchmark market with a broker beside it.
type versus struct {
	m       *benchMarket
	br      *centralBroker
	brID    peer.ID
	renters []int  // both ways' renters: the market's, less the broker's node
	settle  func() // nil, or waits (untimed) before each round
}

func newVersus(b *testing.B) *versus {
	m := newBenchMarket(b)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	bn := m.c.Nodes()[brokerNode]
	br, err := startBroker(ctx, bn, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	v := &versus{m: m, br: br, brID: bn.Host().ID()}
	for _, i := range m.renters {
		if i != brokerNode {
			v.renters = append(v.renters, i)
		}
	}
	waitBrokerBook(b, bn, m, 30*time.Second)
	// As the market's setup: one job per renter at once, so that the
	// first streams to the broker and from it are not in a measured round.
	v.brokerRound(b, v.renters, true)
	m.drain(b)
	return v
}

// waitBrokerBook waits until the broker's book holds every provider's
// offer.
func waitBrokerBook(tb testing.TB, bn *node.Node, m *benchMarket, limit time.Duration) {
	tb.Helper()
	waitBrokerOffers(tb, bn, m, limit, "lacks provider node %d's offer", func(*auction.Offer) bool { return true })
}

// waitBrokerOffers waits until the broker's book holds an offer of every
// provider that ready accepts; it fails with notReady (given the
// provider's node) after limit.
func waitBrokerOffers(tb testing.TB, bn *node.Node, m *benchMarket, limit time.Duration, notReady string, ready func(*auction.Offer) bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for _, i := range providerNodes(m) {
		id := m.c.Nodes()[i].Host().ID().String()
		for {
			if o, _, ok := bn.Book().Get(id); ok && ready(o) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("after %v, the broker's book "+notReady, limit, i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func providerNodes(m *benchMarket) []int {
	var out []int
	for i := range m.c.Nodes() {
		if !slices.Contains(m.renters, i) {
			out = append(out, i)
		}
	}
	return out
}

// brokerRound sends one job from each of the given renters to the broker
// at once, returns their submit-to-lease latencies, and waits until the
// broker's runs of them have completed; any failure is fatal.
func (v *versus) brokerRound(tb testing.TB, renters []int, durable bool) []time.Duration {
	out := make([]time.Duration, len(renters))
	errs := make([]error, len(renters))
	var wg sync.WaitGroup
	for k, i := range renters {
		v.m.seq++
		spec := []byte(benchSpec(fmt.Sprintf("bench%d", v.m.seq)))
		from := v.m.c.Nodes()[i]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t0 := time.Now()
			_, _, errs[k] = submitToBroker(ctx, from, v.brID, spec, durable)
			out[k] = time.Since(t0)
		})
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			tb.Fatalf("renter node %d, through the broker: %v", renters[k], err)
		}
	}
	if err := v.br.wait(); err != nil {
		tb.Fatalf("the broker's runs: %v", err)
	}
	return out
}

// benchSpec is the job both ways place: BenchmarkSubmitToLease's.
func benchSpec(name string) string {
	return jobSpec(name, "bronze", "-sleep", "0", "-lines", "0") + "retry: {max_reauctions: 3}\n"
}

// run is one sub-benchmark: b.N iterations of a market round and a
// broker round of `concurrency` jobs each, from the same distinct
// renters, each round drained before the next.
func (v *versus) run(b *testing.B, concurrency int, p95Target float64) {
	if concurrency > len(v.renters) {
		b.Fatalf("%d concurrent jobs need as many renters; there are %d", concurrency, len(v.renters))
	}
	v.runRounds(b, concurrency, p95Target, func(it int) []int {
		renters := make([]int, concurrency)
		for k := range renters {
			renters[k] = v.renters[(it*concurrency+k)%len(v.renters)]
		}
		return renters
	})
}

// burst is the burst sub-benchmark: BenchmarkBurstSubmitToLease's 40
// jobs at once onto the 40 GPUs, two or three from each renter, each way.
// Every round fills every GPU, so before each one the harness waits
// (untimed) until the broker's book shows every provider's GPUs free
// again: a round must not meet the last one's bookings in an offer not
// yet republished, which would fail the broker's placement outright.
func (v *versus) burst(b *testing.B) {
	renters := spreadJobs(v.renters, burstJobs)
	v.settle = func() { waitBookFree(b, v.m.c.Nodes()[brokerNode], v.m, 30*time.Second) }
	defer func() { v.settle = nil }()
	v.runRounds(b, burstJobs, 1.5, func(int) []int { return renters })
}

// waitBookFree waits until bn's book shows every provider's GPUs free
// for the benchmark job's maximum duration.
func waitBookFree(tb testing.TB, bn *node.Node, m *benchMarket, limit time.Duration) {
	tb.Helper()
	waitBrokerOffers(tb, bn, m, limit, "still shows provider node %d's GPUs booked", func(o *auction.Offer) bool {
		now := time.Now()
		return o.FreeFor(len(o.GPUs), now, now.Add(time.Hour)) && len(o.Bronze) == 0
	})
}

// runRounds is a sub-benchmark: b.N iterations of a market round and the
// two broker rounds, from the renters renters(iteration) (distinct or
// not), each round drained before the next. Metrics are named for
// concurrency, the jobs per round.
func (v *versus) runRounds(b *testing.B, concurrency int, p95Target float64, renters func(it int) []int) {
	var market []jobSample
	var broker, durable []time.Duration
	v.br.placements() // the warm-up's
	b.ResetTimer()
	for it := range b.N {
		renters := renters(it)
		// The three ways in turn, each first on every third iteration.
		for way := range 3 {
			if v.settle != nil {
				b.StopTimer()
				v.settle()
				b.StartTimer()
			}
			switch (it + way) % 3 {
			case 0:
				market = append(market, v.m.round(b, renting.StateLeased, renters)...)
			case 1:
				broker = append(broker, v.brokerRound(b, renters, false)...)
			default:
				durable = append(durable, v.brokerRound(b, renters, true)...)
			}
			b.StopTimer()
			v.m.drain(b)
			b.StartTimer()
		}
	}
	b.StopTimer()
	var node, client []time.Duration
	for _, s := range market {
		node, client = append(node, s.node), append(client, s.client)
	}
	ratio := func(p float64, ds []time.Duration) float64 {
		return float64(percentile(ds, p)) / float64(percentile(broker, p))
	}
	ratioDurable := func(p float64, ds []time.Duration) float64 {
		return float64(percentile(ds, p)) / float64(percentile(durable, p))
	}
	b.ReportMetric(ms(percentile(node, 0.50)), "market-p50-ms")
	b.ReportMetric(ms(percentile(node, 0.95)), "market-p95-ms")
	b.ReportMetric(ms(percentile(client, 0.95)), "market-client-p95-ms")
	b.ReportMetric(ms(percentile(broker, 0.50)), "broker-p50-ms")
	b.ReportMetric(ms(percentile(broker, 0.95)), "broker-p95-ms")
	place := v.br.placements()
	b.ReportMetric(ms(percentile(place, 0.50)), "broker-place-p50-ms")
	b.ReportMetric(ms(percentile(place, 0.95)), "broker-place-p95-ms")
	b.ReportMetric(ratio(0.50, node), fmt.Sprintf("p50-ratio-%d", concurrency))
	b.ReportMetric(ratio(0.95, node), fmt.Sprintf("p95-ratio-%d", concurrency))
	b.ReportMetric(ratio(0.95, client), fmt.Sprintf("client-p95-ratio-%d", concurrency))
	b.ReportMetric(ms(percentile(durable, 0.50)), "durable-broker-p50-ms")
	b.ReportMetric(ms(percentile(durable, 0.95)), "durable-broker-p95-ms")
	b.ReportMetric(ratioDurable(0.50, node), fmt.Sprintf("p50-ratio-durable-%d", concurrency))
	b.ReportMetric(ratioDurable(0.95, node), fmt.Sprintf("p95-ratio-durable-%d", concurrency))
	if r := ratio(0.95, node); b.N > 1 && r > p95Target {
		b.Logf("TARGET MISSED: market p95 %v is %.2fx the broker's %v (target %.1fx; %d jobs each way)",
			percentile(node, 0.95), r, percentile(broker, 0.95), p95Target, len(broker))
	}
}

func BenchmarkCentralBroker(b *testing.B) {
	v := newVersus(b)
	b.Run("sequential", func(b *testing.B) { v.run(b, 1, 1.2) })
	b.Run(fmt.Sprintf("concurrent%d", benchConcurrency), func(b *testing.B) { v.run(b, benchConcurrency, 1.5) })
	b.Run(fmt.Sprintf("burst%d", burstJobs), v.burst)
}

// The broker's lease is one the provider holds: co-signed, recorded in the
// provider's leases under the broker's name, and run there to completion.
func TestCentralBrokerLeaseIsHeldByTheProvider(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Node 0 sells, node 1 brokers, node 2 rents.
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 3, Configure: func(i int, cfg *repo.Config) {
		if i == 0 {
			cfg.Provider.SimulateGPUs = "2xH100"
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitPeers(t, c, 1, 30*time.Second)
	pc, err := c.Client(0)
	if err != nil {
		t.Fatal(err)
	}
	offerOn(t, pc, 0, "0.4")
	bn, rn := c.Nodes()[1], c.Nodes()[2]
	br, err := startBroker(ctx, bn, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prov := c.Nodes()[0].Host().ID().String()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, _, ok := bn.Book().Get(prov); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the broker's book lacks the provider's offer after 30 s")
		}
	}

	// A job that stays running, so that the lease is active when looked
	// up: the provider holds its GPU.
	l, raw, err := submitToBroker(ctx, rn, bn.Host().ID(), []byte(jobSpec("central", "bronze", "-sleep", "3s", "-lines", "0")), true)
	if err != nil {
		t.Fatal(err)
	}
	if l.Provider != prov || l.Renter != bn.Host().ID().String() || l.GPUs != 1 {
		t.Fatalf("lease %+v: want provider %s, renter the broker %s, 1 GPU", l, prov, bn.Host().ID())
	}
	var ls []node.LeaseView
	if err := pc.Call(ctx, "lease_list", nil, &ls); err != nil {
		t.Fatal(err)
	}
	cid := auctionCID(t, raw)
	var held *node.LeaseView
	for k := range ls {
		if ls[k].CID == cid {
			held = &ls[k]
		}
	}
	if held == nil {
		t.Fatalf("the provider records no lease %s; it has %+v", cid, ls)
	}
	if !held.Active || held.Lease.Renter != l.Renter || held.Lease.JobID != l.JobID {
		t.Fatalf("the provider's record of the broker's lease: %+v", held)
	}
	// Asked to be durable, the broker committed the job and its lease to
	// its own store before it answered.
	var rec brokerRecord
	if err := br.db.Get(store.BucketJobs, l.JobID, &rec); err != nil || !bytes.Equal(rec.Lease, raw) || rec.Received.IsZero() {
		t.Fatalf("the durable broker's record of job %s: %+v, %v; want its lease", l.JobID, rec, err)
	}
	// The broker ran it there: it completed, and the provider let its
	// GPU go.
	if err := br.wait(); err != nil {
		t.Fatal(err)
	}
	if placed, ran := br.counts(); placed != 1 || ran != 1 {
		t.Fatalf("broker placed %d and ran %d jobs, want 1 and 1", placed, ran)
	}
	m := &benchMarket{c: c, providers: []*rpc.Client{pc}}
	m.drain(t)
}

func auctionCID(t *testing.T, raw []byte) string {
	t.Helper()
	_, sl, err := auction.DecodeSignedLease(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	return sl.CID().String()
}
