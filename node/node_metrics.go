package node

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/gleaner-net/gleaner/node/metrics"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/prometheus/client_golang/prometheus"
)

// nodeMetrics is the node's Prometheus side (metrics.address): a registry
// of its own, the RPC API's histograms, the auction timings and the
// /metrics listener.
type nodeMetrics struct {
	reg   *prometheus.Registry
	rpc   *metrics.RPC
	calls *metrics.Calls
	srv   *metrics.Server
}

// jobStates are every renter job state, reported even when no job is in
// it, so that a series never vanishes.
var jobStates = []string{renting.StateAuction, renting.StateLeased, renting.StateReserved, renting.StateFetching, renting.StatePulling, renting.StateRunning,
	renting.StatePreempting, renting.StatePaused, renting.StateCompleted, renting.StateFailed, renting.StateCancelled, renting.StateNoMatch}

// leaseStates are the provider's lease record states (providing).
var leaseStates = []providing.RecordState{providing.LeaseAwarded, providing.LeaseStarted, providing.LeaseLaunched,
	providing.LeaseInterrupted, providing.LeaseEnded, providing.LeaseExpired}

// gpuReadTimeout bounds the GPU reading of one scrape.
const gpuReadTimeout = time.Second

// metricsOn reports whether metrics.address asks for an endpoint.
func (n *Node) metricsOn() bool { return n.cfg.Metrics.Address != "" }

// metricsRegistry is the node's registry, made on first use with the
// collector that reads the node's state.
func (n *Node) metricsRegistry() *nodeMetrics {
	if n.metrics == nil {
		reg := metrics.NewRegistry(Version, n.cfg.Network)
		reg.MustRegister(metrics.NewCollector(n.readMetrics))
		n.metrics = &nodeMetrics{reg: reg, rpc: metrics.NewRPC(reg), calls: metrics.NewCalls(reg)}
	}
	return n.metrics
}

// instrumentRPC wraps the RPC API's handler with its latency histogram,
// and times each call by method, when metrics are on.
func (n *Node) instrumentRPC(h http.Handler) http.Handler {
	if !n.metricsOn() {
		return h
	}
	m := n.metricsRegistry()
	if n.rpc != nil {
		n.rpc.Observe(m.calls.RPC)
	}
	return m.rpc.Wrap(h)
}

// startMetrics serves /metrics on metrics.address; Stop closes it first,
// before anything a scrape reads.
func (n *Node) startMetrics() error {
	if !n.metricsOn() {
		return nil
	}
	m := n.metricsRegistry()
	srv, err := metrics.Listen(n.cfg.Metrics.Address, m.reg, n.log)
	if err != nil {
		return err
	}
	m.srv = srv
	n.onStop(srv.Shutdown)
	if r := n.renterJobs; r != nil {
		r.TimeAuctions(m.calls)
	}
	n.log.Info("serving metrics", "url", srv.URL())
	return nil
}

// MetricsURL is the Prometheus scrape URL (http://host:port/metrics), ""
// when metrics are off.
func (n *Node) MetricsURL() string {
	if n.metrics == nil || n.metrics.srv == nil {
		return ""
	}
	return n.metrics.srv.URL()
}

// MetricsRegistry is the node's own Prometheus registry (nil when metrics
// are off), for a process that serves several nodes' metrics itself.
func (n *Node) MetricsRegistry() *prometheus.Registry {
	if n.metrics == nil {
		return nil
	}
	return n.metrics.reg
}

// readMetrics fills s from the node's state, each part under the lock
// that already guards it; a part not started yet is left out.
func (n *Node) readMetrics(s *metrics.Snapshot) {
	if h := n.host; h != nil {
		lh := h.LibP2P()
		s.Peers = len(lh.Network().Peers())
		s.Streams = map[metrics.StreamKey]int{}
		for _, c := range lh.Network().Conns() {
			for _, st := range c.GetStreams() {
				p := string(st.Protocol())
				if p == "" {
					p = "unnegotiated"
				}
				s.Streams[metrics.StreamKey{Protocol: p, Direction: streamDirection(st.Stat().Direction)}]++
			}
		}
		if ps := h.PubSub(); ps != nil {
			s.GossipPeers = map[string]int{}
			for _, t := range ps.GetTopics() {
				s.GossipPeers[t] = len(ps.ListPeers(t))
			}
		}
		readTraffic(h, s)
	}
	if n.market != nil {
		s.OffersInBook = n.market.Book().Len()
	}
	if n.provider != nil {
		s.OfferPublished = n.provider.Current() != nil
		if n.gpus != nil {
			n.readGPUs(s)
		}
	}
	if r := n.renterJobs; r != nil {
		s.Jobs = make(map[string]int, len(jobStates))
		for _, st := range jobStates {
			s.Jobs[st] = 0
		}
		for _, j := range r.Snapshot(nil) {
			s.Jobs[j.State]++
			s.JobLeases += j.Attempts
		}
	}
	if n.store != nil {
		n.readLeases(s)
	}
	if d := n.data; d != nil {
		s.HasData, s.DataUsedBytes, s.DataQuota = true, d.Used(), d.Quota()
		if a := n.access; a != nil {
			s.DataRefusedWants = a.Refused()
		}
	}
	if n.rep != nil && n.host != nil {
		// Counters of the proven settlements in the replicated ledger
		// as of the latest reputation pass (made at most every 5 s, and
		// incremental): paid to this node as a provider, and by it as a
		// renter. They rise only: not ledger_balance's spend, which
		// counts a running lease's vouchers and then, lower, its charge,
		// and has the charge before the settlement replicates.
		self := n.host.ID().String()
		for _, st := range n.rep.Settlements() {
			paid := int64(st.Settlement.Paid())
			if st.By == self {
				s.EarnedMicro += paid
			}
			if st.Settlement.Renter == self {
				s.SpentMicro += paid
			}
		}
		s.HasLedger = true
		s.BalanceMicro = int64(FaucetCredits) + s.EarnedMicro - s.SpentMicro
	}
}

// readTraffic reports the host's traffic counters; their labels are the
// host's own, bounded (p2p/traffic.go).
func readTraffic(h *p2p.Host, s *metrics.Snapshot) {
	st := h.StreamTraffic()
	s.StreamBytes = make(map[metrics.StreamKey]uint64, 2*len(st))
	for _, b := range st {
		s.StreamBytes[metrics.StreamKey{Protocol: b.Protocol, Direction: "in"}] = b.In
		s.StreamBytes[metrics.StreamKey{Protocol: b.Protocol, Direction: "out"}] = b.Out
	}
	gt := h.GossipTraffic()
	s.GossipMessages = make(map[metrics.GossipKey]uint64, len(gt)*len(p2p.GossipEvents))
	for _, t := range gt {
		for i, ev := range p2p.GossipEvents {
			s.GossipMessages[metrics.GossipKey{Topic: t.Topic, Event: ev}] = t.Counts[i]
		}
	}
}

// readLeases counts the provider's lease records by state: one read
// transaction over node.db, decoding only each record's state.
func (n *Node) readLeases(s *metrics.Snapshot) {
	s.Leases = make(map[string]int, len(leaseStates))
	for _, st := range leaseStates {
		s.Leases[string(st)] = 0
	}
	pj := n.providerJobs
	_ = n.store.ForEach(store.BucketLeases, func(jobID string, raw []byte) error {
		s.Leases[leaseRecordState(raw)]++
		if pj != nil && pj.Holds(jobID) {
			s.LeasesActive++
		}
		return nil
	})
}

var stateKey = []byte(`"state":"`)

// leaseRecordState is a stored providing.Record's state without decoding
// the whole record: its other fields are base64 and a time, in which a
// quote cannot occur, so the first "state":" is the key. Anything else is
// read as providing.ReadRecord reads it.
func leaseRecordState(raw []byte) string {
	if i := bytes.Index(raw, stateKey); i >= 0 {
		v := raw[i+len(stateKey):]
		if j := bytes.IndexByte(v, '"'); j > 0 && bytes.IndexByte(v[:j], '\\') < 0 {
			return string(v[:j])
		}
	}
	rec, err := providing.ReadRecord(raw)
	if err != nil || rec.State == "" {
		return string(providing.LeaseEnded) // unreadable, or the bare lease bytes of an old record
	}
	return string(rec.State)
}

// readGPUs reports the owner rules' verdict from the monitor's latest
// report, and reads the devices once (one NVML poll, about a millisecond).
func (n *Node) readGPUs(s *metrics.Snapshot) {
	a := n.provider.Availability()
	stopped := len(a.Stop)
	withdrawn := 0
	for i := range a.Withdrawn {
		if _, stop := a.Stop[i]; !stop {
			withdrawn++
		}
	}
	s.GPUs = map[string]int{"available": len(a.Available), "withdrawn": withdrawn, "stopped": stopped}
	if n.gpuMon != nil {
		s.GPUFaults = n.gpuMon.FaultCounts()
	}
	ctx, cancel := context.WithTimeout(n.bgOrBackground(), gpuReadTimeout)
	defer cancel()
	inv, err := n.gpus.Inventory(ctx)
	if err != nil {
		return
	}
	for _, g := range inv.GPUs {
		s.GPU = append(s.GPU, metrics.GPUReading{Index: g.Index, Model: g.Model, TempC: g.TempC, PowerW: g.PowerW,
			UtilPct: g.UtilPct, VRAMMiB: g.VRAMMiB, VRAMFreeMiB: g.VRAMFreeMiB})
	}
}

func (n *Node) bgOrBackground() context.Context {
	if n.bg != nil {
		return n.bg
	}
	return context.Background()
}

func streamDirection(d network.Direction) string {
	switch d {
	case network.DirInbound:
		return "inbound"
	case network.DirOutbound:
		return "outbound"
	}
	return "unknown"
}
