package p2p

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Traffic counting: what the host moves on its streams, by protocol, and
// what gossip does with messages, by topic. Both sit on hot paths (every
// stream Read and Write; every gossip message at every hop), so each count
// is one map lookup in a copy-on-write map and one atomic add, and nothing
// is kept per peer: a label per remote peer would grow without bound, and
// an operator who needs one peer's bytes has libp2p's resource manager.
//
// What may become a label is this node's own: protocols of our network
// and libp2p's own services, and topics this node joined. Anything else,
// however it got there, is counted as OtherLabel; and at most
// maxTrafficLabels of each are ever made, so even a protocol that slipped
// past the allow-list (a handler that matches by prefix) cannot grow the
// series without bound.

// OtherLabel buckets protocols and topics that get no label of their own.
const OtherLabel = "other"

// Unnegotiated labels stream bytes moved before the stream's protocol was
// chosen (multistream-select, and a peer's attempts at protocols we do not
// speak, which never get further than that).
const Unnegotiated = "unnegotiated"

// maxTrafficLabels bounds the protocols, and separately the topics, that
// get a label: gleaner speaks about twenty and joins one topic per offer
// shard plus the ledger's.
const maxTrafficLabels = 64

// libp2pProtocolPrefixes are the protocols of libp2p's own services
// (identify, ping, relay, hole punching, AutoNAT) and of gossipsub, which
// carry no network name but are ours to label.
var libp2pProtocolPrefixes = []string{"/ipfs/", "/libp2p/", "/meshsub/", "/floodsub/"}

// ProtocolBytes is the stream payload bytes of one protocol label since
// the host started (muxer and encryption framing not included).
type ProtocolBytes struct {
	Protocol string
	In, Out  uint64
}

// Gossip message events, as TopicMessages counts them.
const (
	// GossipPublished: this node published the message (counted before
	// its own validators decide; one they refuse fails Publish).
	GossipPublished = iota
	// GossipReceived: a message from a peer, seen for the first time,
	// entered validation.
	GossipReceived
	// GossipDuplicate: a message from a peer that was seen before.
	GossipDuplicate
	// GossipDelivered: a message from a peer passed validation and was
	// handed to this node's subscribers (and forwarded).
	GossipDelivered
	// GossipRejected: a validator (or the signature check) rejected it;
	// the sender's score pays for it.
	GossipRejected
	// GossipIgnored: a validator ignored it: dropped, nobody penalised.
	GossipIgnored
	// GossipThrottled: dropped unvalidated, the validation queue full.
	GossipThrottled
	numGossipEvents
)

// GossipEvents names the events, by index, for labels.
var GossipEvents = [numGossipEvents]string{"published", "received", "duplicate", "delivered", "rejected", "ignored", "throttled"}

// TopicMessages is the gossip message counts of one topic label since the
// host started, indexed by the Gossip* events.
type TopicMessages struct {
	Topic  string
	Counts [numGossipEvents]uint64
}

// traffic is a Host's counters: streams is handed to libp2p as its
// bandwidth reporter, gossip to pubsub as a raw tracer.
type traffic struct {
	streams *streamCounter
	gossip  *gossipCounter
}

func newTraffic(network string) *traffic {
	return &traffic{streams: newStreamCounter(network), gossip: newGossipCounter()}
}

// StreamTraffic is the stream bytes by protocol label. A host wrapped by
// NewFromHost reports none: its libp2p host was built without our
// reporter.
func (h *Host) StreamTraffic() []ProtocolBytes { return h.traffic.streams.snapshot() }

// GossipTraffic is the gossip message counts by topic label.
func (h *Host) GossipTraffic() []TopicMessages { return h.traffic.gossip.snapshot() }

// labelSet maps keys to their counters: lock-free reads from a
// copy-on-write map, a mutex for the rare write. T is a counter struct,
// zero-valued at creation.
type labelSet[K comparable, T any] struct {
	m     atomic.Pointer[map[K]*T]
	mu    sync.Mutex // serialises writers of m
	other T          // for keys refused a label
}

func (s *labelSet[K, T]) get(k K) (*T, bool) {
	if m := s.m.Load(); m != nil {
		if c, ok := (*m)[k]; ok {
			return c, true
		}
	}
	return nil, false
}

// add gives k a counter of its own unless maxTrafficLabels are made; then
// k shares other.
func (s *labelSet[K, T]) add(k K) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[K]*T{}
	if m := s.m.Load(); m != nil {
		old = *m
	}
	if c, ok := old[k]; ok {
		return c
	}
	if len(old) >= maxTrafficLabels {
		return &s.other
	}
	next := make(map[K]*T, len(old)+1)
	for key, c := range old {
		next[key] = c
	}
	c := new(T)
	next[k] = c
	s.m.Store(&next)
	return c
}

func (s *labelSet[K, T]) each(f func(K, *T)) {
	if m := s.m.Load(); m != nil {
		for k, c := range *m {
			f(k, c)
		}
	}
}

type byteCounts struct{ in, out atomic.Uint64 }

// streamCounter is a metrics.Reporter that keeps only per-protocol totals.
// libp2p's own BandwidthCounter keeps a meter per peer too, which we must
// not (see above), and rates, which Prometheus derives itself.
type streamCounter struct {
	prefix string // "/gleaner/N/"
	known  labelSet[protocol.ID, byteCounts]
	unneg  byteCounts
}

var _ metrics.Reporter = (*streamCounter)(nil)

func newStreamCounter(network string) *streamCounter {
	return &streamCounter{prefix: string(protocolPrefix(network)) + "/"}
}

// ours reports whether p may be a label.
func (c *streamCounter) ours(p protocol.ID) bool {
	s := string(p)
	if strings.HasPrefix(s, c.prefix) {
		return true
	}
	for _, pre := range libp2pProtocolPrefixes {
		if strings.HasPrefix(s, pre) {
			return true
		}
	}
	return false
}

func (c *streamCounter) counts(p protocol.ID) *byteCounts {
	if p == "" {
		return &c.unneg
	}
	if b, ok := c.known.get(p); ok {
		return b
	}
	if !c.ours(p) {
		return &c.known.other
	}
	return c.known.add(p)
}

func (c *streamCounter) LogSentMessageStream(n int64, p protocol.ID, _ peer.ID) {
	if n > 0 {
		c.counts(p).out.Add(uint64(n))
	}
}

func (c *streamCounter) LogRecvMessageStream(n int64, p protocol.ID, _ peer.ID) {
	if n > 0 {
		c.counts(p).in.Add(uint64(n))
	}
}

// The swarm calls these beside the per-stream ones; the totals are the
// sum of the protocols, so they keep nothing.
func (c *streamCounter) LogSentMessage(int64) {}
func (c *streamCounter) LogRecvMessage(int64) {}

func (c *streamCounter) snapshot() []ProtocolBytes {
	out := []ProtocolBytes{
		{Protocol: Unnegotiated, In: c.unneg.in.Load(), Out: c.unneg.out.Load()},
		{Protocol: OtherLabel, In: c.known.other.in.Load(), Out: c.known.other.out.Load()},
	}
	c.known.each(func(p protocol.ID, b *byteCounts) {
		out = append(out, ProtocolBytes{Protocol: string(p), In: b.in.Load(), Out: b.out.Load()})
	})
	return out
}

// The rest of metrics.Reporter, for whoever asks libp2p's host: totals by
// protocol, nothing by peer (not kept), no rates.

func (c *streamCounter) GetBandwidthForPeer(peer.ID) metrics.Stats { return metrics.Stats{} }
func (c *streamCounter) GetBandwidthByPeer() map[peer.ID]metrics.Stats {
	return map[peer.ID]metrics.Stats{}
}

func (c *streamCounter) GetBandwidthForProtocol(p protocol.ID) metrics.Stats {
	b := c.counts(p)
	return metrics.Stats{TotalIn: int64(b.in.Load()), TotalOut: int64(b.out.Load())}
}

func (c *streamCounter) GetBandwidthByProtocol() map[protocol.ID]metrics.Stats {
	out := map[protocol.ID]metrics.Stats{}
	for _, b := range c.snapshot() {
		out[protocol.ID(b.Protocol)] = metrics.Stats{TotalIn: int64(b.In), TotalOut: int64(b.Out)}
	}
	return out
}

func (c *streamCounter) GetBandwidthTotals() metrics.Stats {
	var s metrics.Stats
	for _, b := range c.snapshot() {
		s.TotalIn += int64(b.In)
		s.TotalOut += int64(b.Out)
	}
	return s
}

// Reset and TrimIdle are no-ops: counters only grow (Prometheus counts on
// that), and there are no idle per-peer meters to trim.
func (c *streamCounter) Reset()             {}
func (c *streamCounter) TrimIdle(time.Time) {}

type topicCounts [numGossipEvents]atomic.Uint64

// gossipCounter is a pubsub.RawTracer counting messages by topic. Topics
// get a label when this node joins them (Join, called from pubsub's own
// loop), never because a message names them; a topic left keeps its
// counters, which must not go back.
type gossipCounter struct {
	self   peer.ID // set before pubsub starts, read only after
	topics labelSet[string, topicCounts]
}

var _ pubsub.RawTracer = (*gossipCounter)(nil)

func newGossipCounter() *gossipCounter { return &gossipCounter{} }

func (g *gossipCounter) count(m *pubsub.Message, ev int) {
	c, ok := g.topics.get(m.GetTopic())
	if !ok {
		c = &g.topics.other
	}
	c[ev].Add(1)
}

func (g *gossipCounter) Join(topic string) { g.topics.add(topic) }

// validating is called by every topic validator (Host.Join): pubsub hands
// its raw tracers only messages from peers, so this node's own publishes
// are counted as they enter validation, before the validators decide.
func (g *gossipCounter) validating(from peer.ID, m *pubsub.Message) {
	if from == g.self {
		g.count(m, GossipPublished)
	}
}

// The tracer methods below see peers' messages only (pubsub does not
// trace this node's own to raw tracers).

// ValidateMessage is the first sight of a message that is not a duplicate.
func (g *gossipCounter) ValidateMessage(m *pubsub.Message) { g.count(m, GossipReceived) }

func (g *gossipCounter) DeliverMessage(m *pubsub.Message) { g.count(m, GossipDelivered) }

func (g *gossipCounter) RejectMessage(m *pubsub.Message, reason string) {
	switch reason {
	case pubsub.RejectValidationIgnored:
		g.count(m, GossipIgnored)
	case pubsub.RejectValidationThrottled, pubsub.RejectValidationQueueFull:
		g.count(m, GossipThrottled)
	default:
		g.count(m, GossipRejected)
	}
}

func (g *gossipCounter) DuplicateMessage(m *pubsub.Message) { g.count(m, GossipDuplicate) }

func (g *gossipCounter) snapshot() []TopicMessages {
	read := func(topic string, c *topicCounts) TopicMessages {
		t := TopicMessages{Topic: topic}
		for i := range c {
			t.Counts[i] = c[i].Load()
		}
		return t
	}
	out := []TopicMessages{read(OtherLabel, &g.topics.other)}
	g.topics.each(func(topic string, c *topicCounts) { out = append(out, read(topic, c)) })
	return out
}

// Events the counters do not need.

func (g *gossipCounter) Leave(string)                                         {}
func (g *gossipCounter) Graft(peer.ID, string)                                {}
func (g *gossipCounter) Prune(peer.ID, string)                                {}
func (g *gossipCounter) ThrottlePeer(peer.ID)                                 {}
func (g *gossipCounter) RecvRPC(*pubsub.RPC)                                  {}
func (g *gossipCounter) SendRPC(*pubsub.RPC, peer.ID)                         {}
func (g *gossipCounter) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (g *gossipCounter) DropRPC(*pubsub.RPC, peer.ID)                         {}
func (g *gossipCounter) UndeliverableMessage(*pubsub.Message)                 {}
func (g *gossipCounter) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (g *gossipCounter) OnClosedOutboundStream(peer.ID)                       {}
