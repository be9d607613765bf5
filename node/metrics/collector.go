package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot is the node state one scrape reports. The node fills it in
// (Collector's read function) from what it keeps anyway; a part it cannot
// read (a node without GPUs, a store not open) stays zero or nil, and its
// series are left out or read 0.
type Snapshot struct {
	// Peers is the number of peers connected.
	Peers int
	// Streams counts the open libp2p streams by protocol and direction.
	Streams map[StreamKey]int
	// GossipPeers is, per gossip topic joined, the peers seen on it.
	GossipPeers map[string]int
	// StreamBytes is the stream payload bytes since the host started, by
	// protocol and direction ("in", "out"); protocols are the host's
	// bounded labels (p2p.Host.StreamTraffic).
	StreamBytes map[StreamKey]uint64
	// GossipMessages counts gossip messages since the host started, by
	// topic (the host's bounded labels) and event (p2p.GossipEvents).
	GossipMessages map[GossipKey]uint64

	// OffersInBook is the renter's offer book size (expired offers
	// included until the next sweep).
	OffersInBook int
	// OfferPublished: this node has a live offer of its own out.
	OfferPublished bool

	// Jobs counts the renter's jobs by state (every state the node
	// knows, 0 included, so a series never vanishes).
	Jobs map[string]int
	// JobLeases is the leases the renter took for its jobs, re-auctions
	// included (the sum of the jobs' attempts).
	JobLeases int

	// Leases counts the provider's lease records by state.
	Leases map[string]int
	// LeasesActive is the leases holding this provider's GPUs now.
	LeasesActive int

	// Data is the block store's fill; HasData false leaves it out.
	HasData                  bool
	DataUsedBytes, DataQuota int64
	// DataRefusedWants is how many block wants this node refused since
	// it started (data.Access.Refused, what data ls shows): peers asking
	// for private data they were not granted.
	DataRefusedWants int64

	// GPUs counts this node's GPUs by what the owner's rules allow:
	// available, withdrawn, stopped. Nil: the node has none to sell.
	GPUs map[string]int
	// GPU are the per-device readings.
	GPU []GPUReading
	// GPUFaults counts the GPU faults the node's monitor detected since
	// it started, by kind (attest.FaultXid, attest.FaultECC: a bounded
	// set). Nil: the node has no GPUs to sell.
	GPUFaults map[string]uint64

	// The ledger: proven settlements, in micro-credits. HasLedger false
	// leaves them out.
	HasLedger                             bool
	EarnedMicro, SpentMicro, BalanceMicro int64
}

// StreamKey labels gleaner_p2p_streams and gleaner_p2p_stream_bytes_total.
type StreamKey struct{ Protocol, Direction string }

// GossipKey labels gleaner_gossip_messages_total.
type GossipKey struct{ Topic, Event string }

// GPUReading is one device's telemetry at scrape time.
type GPUReading struct {
	Index                int
	Model                string
	TempC                int
	PowerW               float64
	UtilPct              int
	VRAMMiB, VRAMFreeMiB int
}

// Collector reports a Snapshot as gauges on every scrape.
type Collector struct {
	read func(*Snapshot)

	peers, streams, gossipPeers      *prometheus.Desc
	streamBytes, gossipMessages      *prometheus.Desc
	offers, offerPublished           *prometheus.Desc
	jobs, jobLeases                  *prometheus.Desc
	leases, leasesActive             *prometheus.Desc
	data, dataRefused                *prometheus.Desc
	gpus, gpuTemp, gpuPower, gpuUtil *prometheus.Desc
	gpuMem, gpuFaults                *prometheus.Desc
	earned, spent, balance           *prometheus.Desc
	descs                            []*prometheus.Desc
}

// NewCollector reports what read fills in, calling it once per scrape;
// read must be safe to call from any goroutine.
func NewCollector(read func(*Snapshot)) *Collector {
	c := &Collector{read: read}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
		c.descs = append(c.descs, desc)
		return desc
	}
	c.peers = d("peers", "Peers connected.")
	c.streams = d("p2p_streams", "Open libp2p streams by protocol and direction.", "protocol", "direction")
	c.gossipPeers = d("gossip_topic_peers", "Peers seen on each gossip topic this node joined.", "topic")
	c.streamBytes = d("p2p_stream_bytes_total", "libp2p stream payload bytes by protocol and direction (in, out).", "protocol", "direction")
	c.gossipMessages = d("gossip_messages_total", "Gossip messages by topic and what became of them.", "topic", "event")
	c.offers = d("offers_in_book", "Offers in the renter's book (expired ones until the next sweep).")
	c.offerPublished = d("offer_published", "1 while this node has a live offer of its own out, else 0.")
	c.jobs = d("jobs", "The renter's jobs by state.", "state")
	c.jobLeases = d("job_leases_total", "Leases the renter took for its jobs (awards, re-auctions included).")
	c.leases = d("leases", "The provider's lease records by state.", "state")
	c.leasesActive = d("leases_active", "Leases holding this provider's GPUs now.")
	c.data = d("data_store_bytes", "The block store: bytes used, and its quota.", "kind")
	c.dataRefused = d("data_refused_wants_total", "Block wants refused since the node started: peers asking for private data they were not granted.")
	c.gpus = d("gpus", "This node's GPUs by what the owner's rules allow (available, withdrawn, stopped).", "state")
	c.gpuTemp = d("gpu_temperature_celsius", "GPU temperature.", "index", "model")
	c.gpuPower = d("gpu_power_watts", "GPU power draw.", "index", "model")
	c.gpuUtil = d("gpu_utilization_ratio", "GPU utilization, 0 to 1.", "index", "model")
	c.gpuMem = d("gpu_memory_bytes", "GPU memory: total and free.", "index", "model", "kind")
	c.gpuFaults = d("gpu_faults_total", "GPU faults detected since the node started, by kind (xid: an Xid critical error, ecc: a rise in uncorrected ECC errors).", "kind")
	c.earned = d("earned_microcredits_total", "Micro-credits earned as a provider, from proven settlements.")
	c.spent = d("spent_microcredits_total", "Micro-credits spent as a renter, from proven settlements.")
	c.balance = d("balance_microcredits", "Faucet + earned - spent, in micro-credits.")
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	var s Snapshot
	c.read(&s)
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(c.peers, float64(s.Peers))
	for k, v := range s.Streams {
		g(c.streams, float64(v), k.Protocol, k.Direction)
	}
	for topic, v := range s.GossipPeers {
		g(c.gossipPeers, float64(v), topic)
	}
	for k, v := range s.StreamBytes {
		ch <- prometheus.MustNewConstMetric(c.streamBytes, prometheus.CounterValue, float64(v), k.Protocol, k.Direction)
	}
	for k, v := range s.GossipMessages {
		ch <- prometheus.MustNewConstMetric(c.gossipMessages, prometheus.CounterValue, float64(v), k.Topic, k.Event)
	}
	g(c.offers, float64(s.OffersInBook))
	g(c.offerPublished, b2f(s.OfferPublished))
	for state, v := range s.Jobs {
		g(c.jobs, float64(v), state)
	}
	ch <- prometheus.MustNewConstMetric(c.jobLeases, prometheus.CounterValue, float64(s.JobLeases))
	for state, v := range s.Leases {
		g(c.leases, float64(v), state)
	}
	g(c.leasesActive, float64(s.LeasesActive))
	if s.HasData {
		g(c.data, float64(s.DataUsedBytes), "used")
		g(c.data, float64(s.DataQuota), "quota")
		ch <- prometheus.MustNewConstMetric(c.dataRefused, prometheus.CounterValue, float64(s.DataRefusedWants))
	}
	for state, v := range s.GPUs {
		g(c.gpus, float64(v), state)
	}
	for _, r := range s.GPU {
		idx := strconv.Itoa(r.Index)
		g(c.gpuTemp, float64(r.TempC), idx, r.Model)
		g(c.gpuPower, r.PowerW, idx, r.Model)
		g(c.gpuUtil, float64(r.UtilPct)/100, idx, r.Model)
		g(c.gpuMem, float64(r.VRAMMiB)*(1<<20), idx, r.Model, "total")
		g(c.gpuMem, float64(r.VRAMFreeMiB)*(1<<20), idx, r.Model, "free")
	}
	for kind, v := range s.GPUFaults {
		ch <- prometheus.MustNewConstMetric(c.gpuFaults, prometheus.CounterValue, float64(v), kind)
	}
	if s.HasLedger {
		ch <- prometheus.MustNewConstMetric(c.earned, prometheus.CounterValue, float64(s.EarnedMicro))
		ch <- prometheus.MustNewConstMetric(c.spent, prometheus.CounterValue, float64(s.SpentMicro))
		g(c.balance, float64(s.BalanceMicro))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
