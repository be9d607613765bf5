package testnet

// Benchmarks of a renter's wait: from the job_submit call to a co-signed
// lease (BenchmarkSubmitToLease) and to a running container
// (BenchmarkSubmitToRunning), on a 20-node in-process cluster in which 5
// providers sell 8 simulated H100s each. Jobs run the demo image, which is
// built and cached first, with `-sleep 0 -lines 0`, so that each exits at
// once; every iteration waits until its jobs have completed and every
// provider has released their GPUs before the next one starts (outside the
// timer). They need a running Docker engine and fail without one.
//
// Loopback:
//
//	go test -run '^$' -bench 'SubmitTo' -benchtime 20x -timeout 20m ./testnet
//
// With 25 ms added to every packet on loopback (50 ms round trips between
// nodes), in a network namespace of its own (as root; iproute2 provides
// ip and tc):
//
//	go test -c -o /tmp/testnet.test ./testnet
//	ip netns add gleaner-bench
//	ip netns exec gleaner-bench ip link set lo up
//	ip netns exec gleaner-bench tc qdisc add dev lo root netem delay 25ms limit 100000
//	cd testnet && GLEANER_BENCH_NETEM=25ms ip netns exec gleaner-bench \
//	    /tmp/testnet.test -test.run '^$' -test.bench 'SubmitTo' -test.benchtime 20x -test.timeout 30m
//	ip netns del gleaner-bench
//
// The kernel must have sch_netem (CONFIG_NET_SCH_NETEM): `tc` answers
// "Specified qdisc kind is unknown" where it has not, as on the Firecracker
// kernels of the shared build machines, and then there is no 25 ms run.
// (limit 100000: netem's default queue of 1000 packets overflows under 25 ms
// of delay with 20 nodes gossiping, and the drops then show up as TCP
// retransmission stalls. Docker's socket is a Unix socket, so the engine and
// its containers are unaffected by the namespace.)
//
// GLEANER_BENCH_NETEM only labels the results (metric netem-ms); the
// benchmark checks it against a measured loopback TCP handshake (metric
// lo-rtt-ms) and fails when the two disagree, so that a result is never
// labelled with a latency it did not run under.
//
// Method. The benchmark talks to each renter over one long-lived WebSocket:
// it sends job_submit, then job_follow for the returned ID, then
// job_status. The subscription is registered before job_follow replies, so
// if job_status still says "auction" the transition is certain to arrive
// as an event; if the job has already moved on (the auction beat the
// subscription), the sample is counted in the metric "late": its client
// side is then the job_status reply, an upper bound, and its node side is
// the record's Updated, exact while the job is still in the timed state
// and otherwise an upper bound, counted in "node-bound". Late samples are
// the fast ones, so the percentiles err on the slow side. Two latencies per
// job:
//
//   - ms (p50-ms, p95-ms): what the RPC client sees, from just before the
//     job_submit frame is written to the moment the event frame is read;
//     it includes the RPC request's and the notification's trips over
//     loopback, so under netem it includes 2 x 25 ms that a renter talking
//     to its own node would not pay.
//   - node-ms (node-p50-ms, node-p95-ms): the renter node's own clock, from
//     the job record's Created (set when job_submit is handled) to the
//     state event's Time (set when the new state is recorded and published).
//     The nodes run in this process, so both clocks are the same; this is
//     the node-internal part, the one to compare with the netem target.
//
// rebids/op counts awards that a provider refused (its GPUs were taken by
// a concurrent lease) and that went to the next-ranked bid.
//
// Targets from the issue: SubmitToLease p95 < 50 ms sequential on loopback,
// p95 < 400 ms with 50 ms round trips; SubmitToRunning p50 < 1 s. A missed
// target is logged, not failed: the numbers depend on the machine.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
)

const (
	benchJobNodes     = 20
	benchProviderStep = 4 // nodes 0, 4, 8, 12 and 16 sell GPUs
	benchJobGPUs      = "8xH100"
	benchConcurrency  = 10
)

// benchMarket is the cluster shared by the sub-benchmarks of one benchmark.
type benchMarket struct {
	c         *Cluster
	providers []*rpc.Client
	renters   []int // nodes that sell nothing
	ws        map[int]*wsClient
	oneWay    time.Duration // netem's label
	rtt       time.Duration // measured loopback round trip
	seq       int
}

func newBenchMarket(b *testing.B) *benchMarket { return newBenchMarketLinks(b, 0) }

// newBenchMarketLinks runs the nodes over mocknet links with the given
// one-way latency (0: loopback TCP), for kernels without netem.
func newBenchMarketLinks(b testing.TB, link time.Duration) *benchMarket {
	return newBenchMarketFloors(b, link, false)
}

// newBenchMarketFloors is newBenchMarketLinks where equalFloors gives
// every provider the same floor (owners who keep the default price)
// instead of distinct ones.
func newBenchMarketFloors(b testing.TB, link time.Duration, equalFloors bool) *benchMarket {
	requireDocker(b)
	m := &benchMarket{ws: map[int]*wsClient{}}
	m.oneWay, m.rtt = benchLatency(b)
	if link > 0 {
		m.oneWay = link
	}
	t0 := time.Now()
	// The nodes' background work (offer renewal among it) lives as long as
	// the context they were started with: cancel it only at the end.
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	c, err := NewCluster(ctx, ClusterOptions{Nodes: benchJobNodes, Fanout: 2, LinkLatency: link, Configure: func(i int, cfg *repo.Config) {
		if i%benchProviderStep == 0 {
			cfg.Provider.SimulateGPUs = benchJobGPUs
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	m.c = c
	waitPeers(b, c, 2, 30*time.Second)

	want := map[string]bool{}
	for i := range benchJobNodes {
		if i%benchProviderStep != 0 {
			m.renters = append(m.renters, i)
			continue
		}
		cl, err := c.Client(i)
		if err != nil {
			b.Fatal(err)
		}
		// Distinct floors (unless equalFloors): every auction has a clear
		// ranking, and a burst fills the cheapest provider first, as a
		// real market would.
		floor := fmt.Sprintf("0.4%d", i/benchProviderStep)
		if equalFloors {
			floor = "0.4"
		}
		offerOn(b, cl, i, floor)
		m.providers = append(m.providers, cl)
		want[c.Nodes()[i].Host().ID().String()] = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, i := range m.renters {
		cl, err := c.Client(i)
		if err != nil {
			b.Fatal(err)
		}
		for !subset(want, bookOn(b, cl, i, "")) {
			if time.Now().After(deadline) {
				b.Fatalf("renter node %d knows %d of the %d offers after 30 s", i, len(bookOn(b, cl, i, "")), len(want))
			}
			time.Sleep(20 * time.Millisecond)
		}
		m.ws[i] = dialWS(b, c.Nodes()[i])
	}
	// One job per renter, all at once: first streams to every provider,
	// first containers, so that the first measured iteration is not the
	// cold one.
	m.round(b, renting.StateLeased, m.renters)
	m.drain(b)
	b.Logf("setup %v: %d nodes, providers %d x %s, loopback round trip %v, netem one-way %v",
		time.Since(t0).Round(time.Millisecond), benchJobNodes, len(m.providers), benchJobGPUs, m.rtt.Round(time.Microsecond), m.oneWay)
	return m
}

// jobSample is one job's measurement.
type jobSample struct {
	client time.Duration // job_submit written -> event read
	node   time.Duration // record Created -> event Time, on the renter
	late   bool          // the transition preceded the subscription: client is an upper bound
	bound  bool          // node is an upper bound too (the job had moved past target)
	rebids int
	// afterLease: leased event -> target event on the renter (0 when
	// either was not seen as an event, or target is leased).
	afterLease time.Duration
}

// reached reports whether state is target or a later state of a job that
// ran; the second result is false for a job that ended otherwise.
func reached(state, target string) (bool, bool) {
	order := []string{renting.StateAuction, renting.StateLeased, renting.StateReserved, renting.StatePulling,
		renting.StateRunning, renting.StatePreempting, renting.StateCompleted}
	ti, si := -1, -1
	for k, s := range order {
		if s == target {
			ti = k
		}
		if s == state {
			si = k
		}
	}
	if si < 0 {
		return false, false
	}
	return si >= ti, true
}

// measure submits one job through ws, times its way to target and waits
// until it has completed.
func (m *benchMarket) measure(ws *wsClient, target, name string) (jobSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var s jobSample
	// A burst fills every GPU, so on two loaded cores a provider with a
	// free GPU can miss the quote deadline and leave a round with no
	// match; the job is then auctioned again, as a renter expecting
	// bursts would ask, and the wait counts in its latency.
	spec := jobSpec(name, "bronze", "-sleep", "0", "-lines", "0") + "retry: {max_reauctions: 3}\n"
	t0 := time.Now()
	var j renting.JobRecord
	if _, err := ws.call(ctx, "job_submit", node.JobSubmitParams{Spec: spec}, &j); err != nil {
		return s, err
	}
	var sub string
	if _, err := ws.call(ctx, "job_follow", node.JobIDParams{ID: j.ID}, &sub); err != nil {
		return s, err
	}
	defer ws.forget(sub)
	notes := ws.subscription(sub)
	var st renting.JobRecord
	at, err := ws.call(ctx, "job_status", node.JobIDParams{ID: j.ID}, &st)
	if err != nil {
		return s, err
	}
	got := false
	if ok, ran := reached(st.State, target); !ran && st.State != renting.StateAuction {
		return s, m.jobError(ctx, ws, j.ID, st.State, st.Error)
	} else if ok {
		// The auction beat the subscription. Updated is when the record
		// took its current state: exact when that is the target, an upper
		// bound when the job has moved on; the client side is the
		// job_status reply, an upper bound.
		got, s.late, s.bound = true, true, st.State != target
		s.client, s.node = at.Sub(t0), st.Updated.Sub(j.Created)
	}
	final := st.State
	var leasedAt time.Time
	for done := false; !done; {
		select {
		case n, open := <-notes:
			if !open {
				return s, fmt.Errorf("job %s: the websocket closed while following it", j.ID)
			}
			if n.done {
				if n.err != nil {
					return s, fmt.Errorf("job %s: job_follow ended: %v", j.ID, n.err)
				}
				done = true
				break
			}
			var ev renting.JobEvent
			if err := json.Unmarshal(n.result, &ev); err != nil {
				return s, err
			}
			if ev.Type != "state" {
				continue
			}
			final = ev.State
			if ev.State == renting.StateLeased {
				leasedAt = ev.Time
			}
			ok, ran := reached(ev.State, target)
			if !ran {
				return s, m.jobError(ctx, ws, j.ID, ev.State, ev.Note)
			}
			if ok && !got {
				got = true
				s.client, s.node = n.at.Sub(t0), ev.Time.Sub(j.Created)
				if !leasedAt.IsZero() && ev.State != renting.StateLeased {
					s.afterLease = ev.Time.Sub(leasedAt)
				}
				s.bound = ev.State != target // an event was lost: cannot happen with a 256-event buffer
			}
		case <-ctx.Done():
			return s, m.stuck(ws, j.ID, final, time.Since(t0))
		}
	}
	if final != renting.StateCompleted {
		return s, m.jobError(ctx, ws, j.ID, final, "")
	}
	if !got {
		return s, fmt.Errorf("job %s completed without a %s event", j.ID, target)
	}
	var ex renter.Explain
	if _, err := ws.call(ctx, "job_explain", node.JobIDParams{ID: j.ID}, &ex); err != nil {
		return s, err
	}
	for _, a := range ex.Awards {
		if a.Refused != "" {
			s.rebids++
		}
	}
	return s, nil
}

// stuck describes a job that did not finish in time: the renter's
// explanation, and each provider's leases for it with their state, so
// that a run that fails says which side stopped.
func (m *benchMarket) stuck(ws *wsClient, id, state string, after time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ex renter.Explain
	_, exErr := ws.call(ctx, "job_explain", node.JobIDParams{ID: id}, &ex)
	var held []string
	for k, cl := range m.providers {
		var ls []node.LeaseView
		if err := cl.Call(ctx, "lease_list", nil, &ls); err != nil {
			held = append(held, fmt.Sprintf("provider node %d: lease_list: %v", k*benchProviderStep, err))
			continue
		}
		for _, l := range ls {
			if l.Lease != nil && l.Lease.JobID == id {
				held = append(held, fmt.Sprintf("provider node %d: lease %s active=%v", k*benchProviderStep, l.State, l.Active))
			}
		}
	}
	return fmt.Errorf("job %s: %s after %v\nexplain (%v): %+v\nproviders: %v", id, state, after, exErr, ex, held)
}

func (m *benchMarket) jobError(ctx context.Context, ws *wsClient, id, state, why string) error {
	var ex renter.Explain
	_, _ = ws.call(ctx, "job_explain", node.JobIDParams{ID: id}, &ex)
	return fmt.Errorf("job %s ended %s (%s)\nexplain: %+v", id, state, why, ex)
}

// round runs one job on each of the given renters at once and returns the
// samples; any failure is fatal.
func (m *benchMarket) round(b testing.TB, target string, renters []int) []jobSample {
	out := make([]jobSample, len(renters))
	errs := make([]error, len(renters))
	var wg sync.WaitGroup
	for k, i := range renters {
		m.seq++
		name := fmt.Sprintf("bench%d", m.seq)
		wg.Go(func() { out[k], errs[k] = m.measure(m.ws[i], target, name) })
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			b.Fatalf("renter node %d: %v", renters[k], err)
		}
	}
	return out
}

// drain waits until no provider holds a lease: a provider frees a job's
// GPUs after removing its container, which is after the renter hears that
// the job exited.
func (m *benchMarket) drain(b testing.TB) {
	deadline := time.Now().Add(30 * time.Second)
	for k, cl := range m.providers {
		for {
			var ls []node.LeaseView
			if err := cl.Call(context.Background(), "lease_list", nil, &ls); err != nil {
				b.Fatal(err)
			}
			active := 0
			for _, l := range ls {
				if l.Active {
					active++
				}
			}
			if active == 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("provider node %d still holds %d leases 30 s after its jobs completed", k*benchProviderStep, active)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// run is one sub-benchmark: b.N rounds of `concurrency` jobs, from distinct
// renters, each round after the previous one has drained.
func (m *benchMarket) run(b *testing.B, target string, concurrency int, p95Target, p50Target time.Duration) {
	if concurrency > len(m.renters) {
		b.Fatalf("%d concurrent jobs need as many renters; there are %d", concurrency, len(m.renters))
	}
	var all []jobSample
	b.ResetTimer()
	for it := range b.N {
		renters := make([]int, concurrency)
		for k := range renters {
			renters[k] = m.renters[(it*concurrency+k)%len(m.renters)]
		}
		all = append(all, m.round(b, target, renters)...)
		b.StopTimer()
		m.drain(b)
		b.StartTimer()
	}
	b.StopTimer()
	var client, internal, afterLease []time.Duration
	late, bound, rebids := 0, 0, 0
	for _, s := range all {
		client, internal = append(client, s.client), append(internal, s.node)
		if s.late {
			late++
		}
		if s.afterLease > 0 {
			afterLease = append(afterLease, s.afterLease)
		}
		if s.bound {
			bound++
		}
		rebids += s.rebids
	}
	b.ReportMetric(ms(percentile(client, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(client, 0.95)), "p95-ms")
	b.ReportMetric(ms(percentile(client, 1)), "max-ms")
	b.ReportMetric(ms(percentile(internal, 0.50)), "node-p50-ms")
	b.ReportMetric(ms(percentile(internal, 0.95)), "node-p95-ms")
	if target != renting.StateLeased {
		// The provider's part: start stream, image check, container
		// create and start.
		b.ReportMetric(ms(percentile(afterLease, 0.50)), "lease-to-"+target+"-p50-ms")
	}
	b.ReportMetric(float64(late), "late")
	b.ReportMetric(float64(bound), "node-bound")
	b.ReportMetric(float64(rebids)/float64(b.N), "rebids/op")
	b.ReportMetric(ms(m.oneWay), "netem-ms")
	b.ReportMetric(ms(m.rtt), "lo-rtt-ms")
	if len(all) < 10 {
		return // the framework's first, one-iteration run
	}
	if p95Target > 0 && percentile(internal, 0.95) > p95Target {
		b.Logf("TARGET MISSED: node-side p95 %v > %v (%d jobs)", percentile(internal, 0.95), p95Target, len(all))
	}
	if p50Target > 0 && percentile(internal, 0.50) > p50Target {
		b.Logf("TARGET MISSED: node-side p50 %v > %v (%d jobs)", percentile(internal, 0.50), p50Target, len(all))
	}
}

// BenchmarkSubmitToLease: job_submit to a co-signed lease (state leased),
// one job at a time and ten at once from ten renters.
func BenchmarkSubmitToLease(b *testing.B) {
	m := newBenchMarket(b)
	p95 := 50 * time.Millisecond
	if m.oneWay > 0 {
		p95 = 400 * time.Millisecond
	}
	b.Run("sequential", func(b *testing.B) { m.run(b, renting.StateLeased, 1, p95, 0) })
	b.Run(fmt.Sprintf("concurrent%d", benchConcurrency), func(b *testing.B) { m.run(b, renting.StateLeased, benchConcurrency, 0, 0) })
}

// BenchmarkSubmitToLeaseLinks25ms: the same over libp2p mocknet links with
// 25 ms each way (50 ms round trips) between every pair of nodes, for
// machines whose kernel has no netem. The renter's RPC stays on loopback,
// so both latencies measure the network between nodes only.
func BenchmarkSubmitToLeaseLinks25ms(b *testing.B) {
	m := newBenchMarketLinks(b, 25*time.Millisecond)
	b.Run("sequential", func(b *testing.B) { m.run(b, renting.StateLeased, 1, 400*time.Millisecond, 0) })
}

// BenchmarkSubmitToRunning: job_submit to a started container (state
// running), the image already in the local store, one job at a time.
func BenchmarkSubmitToRunning(b *testing.B) {
	m := newBenchMarket(b)
	b.Run("sequential", func(b *testing.B) { m.run(b, renting.StateRunning, 1, 0, time.Second) })
}
