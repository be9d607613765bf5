package p2p

import (
	"context"
	"fmt"
	"maps"
	"net"
	"regexp"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Score thresholds, in the ranges go-libp2p-pubsub's docs and the Filecoin
// and Ethereum deployments use: a handful of invalid messages gets a peer
// ignored for gossip, more gets it graylisted.
var scoreThresholds = &pubsub.PeerScoreThresholds{
	GossipThreshold:             -500,
	PublishThreshold:            -1000,
	GraylistThreshold:           -2500,
	AcceptPXThreshold:           10,
	OpportunisticGraftThreshold: 3.5,
}

// loopbackNets are exempt from the IP-colocation penalty so that a local
// testnet of many nodes on 127.0.0.1 still forms a mesh.
var loopbackNets = func() []*net.IPNet {
	var out []*net.IPNet
	for _, s := range []string{"127.0.0.0/8", "::1/128"} {
		_, n, _ := net.ParseCIDR(s)
		out = append(out, n)
	}
	return out
}()

func (h *Host) peerScoreParams() *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		Topics:        make(map[string]*pubsub.TopicScoreParams),
		TopicScoreCap: 10,
		// Hook for reputation later; the market must not be able to ban a
		// peer from gossip before the ledger has proof, so 0 for now.
		AppSpecificScore:            func(peer.ID) float64 { return 0 },
		AppSpecificWeight:           1,
		IPColocationFactorWeight:    -10,
		IPColocationFactorThreshold: 5,
		IPColocationFactorWhitelist: loopbackNets,
		BehaviourPenaltyWeight:      -10,
		BehaviourPenaltyThreshold:   6,
		BehaviourPenaltyDecay:       pubsub.ScoreParameterDecay(10 * time.Minute),
		DecayInterval:               time.Second,
		DecayToZero:                 0.01,
		RetainScore:                 10 * time.Minute,
	}
}

// topicScoreParams rewards time in mesh and first deliveries a little and
// punishes invalid messages hard (weight -100 on the squared count, decaying
// over an hour): one forged offer costs more than a day of good behaviour
// earns. Mesh-delivery deficits (P3) stay off: offer topics are bursty and
// low-rate, and P3 would prune honest quiet peers.
func topicScoreParams() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		TopicWeight:                    1,
		TimeInMeshWeight:               0.01,
		TimeInMeshQuantum:              time.Second,
		TimeInMeshCap:                  100,
		FirstMessageDeliveriesWeight:   1,
		FirstMessageDeliveriesDecay:    pubsub.ScoreParameterDecay(10 * time.Minute),
		FirstMessageDeliveriesCap:      10,
		InvalidMessageDeliveriesWeight: -100,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(time.Hour),
	}
}

func (h *Host) newPubSub() (*pubsub.PubSub, error) {
	// Only topics of our own network may be subscribed to, so a foreign
	// peer that slipped through cannot make us track its topics.
	filter := pubsub.NewRegexpSubscriptionFilter(
		regexp.MustCompile("^" + regexp.QuoteMeta(h.TopicName("")) + ".+"))
	// The metered host accounts each RPC's declared length to the
	// sending peer's memory budget before pubsub allocates it (meter.go).
	return pubsub.NewGossipSub(h.ctx, MeteredHost(h.h),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithFloodPublish(true),
		// Only public relay/bootstrap nodes hand out peer exchange lists;
		// they see the most peers and are the natural introducers.
		pubsub.WithPeerExchange(h.cfg.relayService),
		pubsub.WithSubscriptionFilter(filter),
		pubsub.WithPeerScore(h.peerScoreParams(), scoreThresholds),
		pubsub.WithPeerScoreInspect(pubsub.PeerScoreInspectFn(h.scores.set), time.Second),
		pubsub.WithLogger(h.log),
		pubsub.WithRawTracer(h.traffic.gossip), // message counts by topic (traffic.go)
	)
}

// Join joins TopicName(name) with v (may be nil) behind a size check that
// rejects messages over maxMsgBytes (<= 0: only pubsub's 1 MiB limit), and
// sets score parameters that penalise peers forwarding invalid messages.
func (h *Host) Join(name string, v pubsub.ValidatorEx, maxMsgBytes int) (*pubsub.Topic, error) {
	topic := h.TopicName(name)
	val := func(ctx context.Context, from peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		h.traffic.gossip.validating(from, m) // our own publishes, which raw tracers never see
		if maxMsgBytes > 0 && len(m.Data) > maxMsgBytes {
			return pubsub.ValidationReject
		}
		if v == nil {
			return pubsub.ValidationAccept
		}
		return v(ctx, from, m)
	}
	// Inline: our validators are cheap, pure CPU checks (size, schema,
	// signature, expiry), and running them on pubsub's validation worker
	// saves a goroutine hand-off per message per hop, which measurably
	// cut p95 propagation latency on a loaded machine. A validator must
	// therefore never block on I/O.
	if err := h.ps.RegisterTopicValidator(topic, pubsub.ValidatorEx(val), pubsub.WithValidatorInline(true)); err != nil {
		return nil, fmt.Errorf("p2p: register validator for %s: %w", topic, err)
	}
	t, err := h.ps.Join(topic)
	if err != nil {
		_ = h.ps.UnregisterTopicValidator(topic)
		return nil, err
	}
	if err := t.SetScoreParams(topicScoreParams()); err != nil {
		_ = t.Close()
		_ = h.ps.UnregisterTopicValidator(topic)
		return nil, err
	}
	return t, nil
}

// PeerScores returns the gossipsub scores of connected peers as of the last
// inspection (once a second). For diagnostics and tests.
func (h *Host) PeerScores() map[peer.ID]float64 { return h.scores.get() }

// scoreBoard holds the latest score snapshot pushed by gossipsub.
type scoreBoard struct {
	mu sync.Mutex // guards m
	m  map[peer.ID]float64
}

func (s *scoreBoard) set(m map[peer.ID]float64) {
	s.mu.Lock()
	s.m = maps.Clone(m)
	s.mu.Unlock()
}

func (s *scoreBoard) get() map[peer.ID]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m)
}
