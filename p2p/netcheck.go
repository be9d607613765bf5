package p2p

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// Network isolation.
//
// Distinct DHT protocols, topic names and mDNS service names already keep
// networks from exchanging data, but a foreign peer would still hold one of
// our connection slots. So every host registers /gleaner/N/hello/1 and drops
// any peer whose identify response lacks it. We key on hello rather than on
// /gleaner/N/kad/1.0.0 because DHT clients do not advertise kad, yet they
// are legitimate members of N. Identify runs on every new connection and is
// already paid for, so the check costs nothing extra and needs no new round
// trip. Peers found foreign are refused by the connection gater for a while
// so that discovery or a bootstrap list does not redial them in a loop.

const helloName = "hello/1"

// foreignTTL is how long a peer stays refused; long enough to stop redial
// loops, short enough that a node restarted on the right network gets back.
const foreignTTL = 10 * time.Minute

// ErrForeignPeer is returned by Connect when the peer belongs to another
// gleaner network (or is not a gleaner node at all).
var ErrForeignPeer = errors.New("p2p: peer is not on this network")

func protocolPrefix(network string) protocol.ID {
	return protocol.ID("/gleaner/" + network)
}

// ProtocolID names a stream protocol on this network: "/gleaner/N/<name>".
func (h *Host) ProtocolID(name string) protocol.ID {
	return protocolPrefix(h.cfg.network) + "/" + protocol.ID(name)
}

// TopicName names a gossip topic on this network: "/gleaner/N/<name>".
func (h *Host) TopicName(name string) string {
	return string(h.ProtocolID(name))
}

// speaksOurNetwork reports whether the identified protocols include hello.
func (h *Host) speaksOurNetwork(protos []protocol.ID) bool {
	return slices.Contains(protos, h.ProtocolID(helloName))
}

// stillForeign re-reads p's protocols for up to 2 s before a verdict: a
// peer that registered its protocols just after its first identify (a
// host wrapped by NewFromHost, say) announces hello in an identify push a
// moment later, and must not be dropped for a stale list.
func (h *Host) stillForeign(p peer.ID) bool {
	for i := 0; i < 20; i++ {
		if protos, err := h.h.Peerstore().GetProtocols(p); err == nil && h.speaksOurNetwork(protos) {
			return false
		}
		select {
		case <-h.ctx.Done():
			return true
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// rejectForeign disconnects p and remembers it. It runs in its own
// goroutine because the event loop must never block the event bus.
func (h *Host) rejectForeign(p peer.ID) {
	h.log.Debug("dropping peer from another network", "peer", p)
	if h.gater != nil {
		h.gater.add(p)
	}
	_ = h.h.Network().ClosePeer(p)
}

// OnNetwork reports whether p identified as a member of this network (its
// identify lists /gleaner/N/hello/1) and is not refused as foreign: the
// peers worth remembering across a restart.
func (h *Host) OnNetwork(p peer.ID) bool {
	if h.isForeign(p) {
		return false
	}
	protos, err := h.h.Peerstore().GetProtocols(p)
	return err == nil && h.speaksOurNetwork(protos)
}

func (h *Host) isForeign(p peer.ID) bool {
	return h.gater != nil && h.gater.has(p)
}

// foreignGater refuses peers recently found to be on another network.
type foreignGater struct {
	mu    sync.Mutex // guards until and held
	until map[peer.ID]time.Time
	held  map[peer.ID]time.Time
}

func newForeignGater() *foreignGater {
	return &foreignGater{until: make(map[peer.ID]time.Time), held: make(map[peer.ID]time.Time)}
}

// hold refuses connections to and from p for d: after an explicit
// Disconnect, neither our DHT's nor the peer's routing-table maintenance
// may dial the connection straight back.
func (g *foreignGater) hold(p peer.ID, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for id, t := range g.held {
		if now.After(t) {
			delete(g.held, id)
		}
	}
	g.held[p] = now.Add(d)
}

// release lifts a hold: an explicit Connect overrides an earlier Disconnect.
func (g *foreignGater) release(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.held, p)
}

// blocked is what the interceptors refuse: foreign or held peers.
func (g *foreignGater) blocked(p peer.ID) bool {
	if g.has(p) {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.held[p]
	return ok && time.Now().Before(t)
}

func (g *foreignGater) add(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for id, t := range g.until { // keep the map bounded by the TTL
		if now.After(t) {
			delete(g.until, id)
		}
	}
	g.until[p] = now.Add(foreignTTL)
}

func (g *foreignGater) has(p peer.ID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.until[p]
	return ok && time.Now().Before(t)
}

func (g *foreignGater) InterceptPeerDial(p peer.ID) bool                 { return !g.blocked(p) }
func (g *foreignGater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return !g.blocked(p) }
func (g *foreignGater) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (g *foreignGater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !g.blocked(p)
}
func (g *foreignGater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
