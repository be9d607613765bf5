package p2p

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Relays (issue 37). Any public node started with --relay serves circuit
// relay v2; a node that AutoNAT finds private reserves a slot on up to
// two of them, picked among its peers (relayPeers), not from a fixed
// list, and advertises the relayed addresses. A peer that cannot dial it
// directly connects through the relay, and hole punching (DCUtR) then
// tries to replace that connection by a direct one.

// hopProto is the relay v2 protocol a relay serves (advertised by
// identify only while its relay service runs).
const hopProto = protocol.ID("/libp2p/circuit/relay/0.2.0/hop")

// Relay limits. libp2p's defaults (2 minutes and 128 KiB a circuit) are
// for bootstrapping a hole punch; a gleaner job's stream (its events and
// logs) may have to live on a relayed connection for as long as the job
// runs when no direct path exists. A circuit that reaches a limit is
// reset, and the renter re-attaches (renter_follow.go), so the limits
// bound a relay's work rather than a job's length.
const (
	RelayCircuitDuration = time.Hour
	RelayCircuitData     = 64 << 20 // bytes each way
	RelayMaxReservations = 128      // peers holding a slot
	RelayMaxCircuits     = 16       // open circuits per peer
)

// RelayResources is what a --relay node grants: libp2p's defaults but for
// the per-circuit limits above. Memory is bounded besides by the resource
// manager's relay service scope (libp2p.SetDefaultServiceLimits).
func RelayResources() relayv2.Resources { return relayResources(0, 0) }

// relayResources is RelayResources with other per-circuit limits (the
// node's p2p.relay_circuit_* settings); zero keeps the default.
func relayResources(duration time.Duration, data int64) relayv2.Resources {
	if duration == 0 {
		duration = RelayCircuitDuration
	}
	if data == 0 {
		data = RelayCircuitData
	}
	r := relayv2.DefaultResources()
	r.Limit = &relayv2.RelayLimit{Duration: duration, Data: data}
	r.MaxReservations = RelayMaxReservations
	r.MaxCircuits = RelayMaxCircuits
	return r
}

// A relay's connections. libp2p scales a node's inbound connections
// with its memory: 96 at limits.max_memory_mb 512, fewer than the 128
// peers a relay lets hold a slot, each of which keeps a connection open,
// besides the peers that dial them through the relay. A --relay node
// admits RelayMaxReservations + relayConnMargin inbound connections, or
// more where its memory gives more, but never more than half its file
// descriptors (a TCP connection takes one; the rest are the node's own
// files and its outbound connections). Its total grows by as much, so
// that its outbound room stays libp2p's.
const relayConnMargin = 64 // inbound beyond the reservations: circuits' dialers, DHT and AutoNAT peers

// relayConns is a relay's system limits on inbound and all connections,
// given libp2p's scaled ones and the node's file descriptors.
func relayConns(scaledIn, scaledAll, maxFD int) (in, all int) {
	in = max(scaledIn, min(RelayMaxReservations+relayConnMargin, maxFD/2))
	return in, scaledAll + in - scaledIn
}

// connHighWater is where the connection manager starts closing
// connections. A relay's is at least its resource manager's connection
// limit: trimming closes the least valued connections down to the low
// water mark, and would take reservations with them.
func connHighWater(cfg *config, limits rcmgr.ConcreteLimitConfig) int {
	if !cfg.relayService {
		return cfg.connHigh
	}
	return max(cfg.connHigh, int(limits.ToPartialLimitConfig().System.Conns))
}

// autoRelayOptions suit a network of a few relays: one candidate is
// enough to start (libp2p waits 3 minutes for four), a relay that said
// no is asked again after a minute (not an hour: it may simply not have
// learnt yet that it is public), and candidates are looked for every 15 s.
func autoRelayOptions() []autorelay.Option {
	return []autorelay.Option{
		autorelay.WithNumRelays(2),
		autorelay.WithMinCandidates(1),
		autorelay.WithBootDelay(0),
		autorelay.WithBackoff(time.Minute),
		autorelay.WithMinInterval(15 * time.Second),
	}
}

// relayPeers is AutoRelay's peer source: the peers this node has met (the
// DHT's and discovery's, and the bootstrap list) that identify says serve
// relay v2, connected ones first, then the bootstrap peers, whose relay
// support is learnt when AutoRelay connects to them.
type relayPeers struct {
	h    atomic.Pointer[host.Host] // set once libp2p.New returns
	boot []peer.AddrInfo
}

func (r *relayPeers) source(ctx context.Context, num int) <-chan peer.AddrInfo {
	out := make(chan peer.AddrInfo, num)
	go func() {
		defer close(out)
		for _, ai := range r.candidates(num) {
			select {
			case out <- ai:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (r *relayPeers) candidates(num int) []peer.AddrInfo {
	var connected, known []peer.AddrInfo
	seen := map[peer.ID]bool{}
	if hp := r.h.Load(); hp != nil {
		h := *hp
		for _, p := range h.Peerstore().PeersWithAddrs() {
			if p == h.ID() {
				continue
			}
			if ps, err := h.Peerstore().SupportsProtocols(p, hopProto); err != nil || len(ps) == 0 {
				continue
			}
			seen[p] = true
			ai := h.Peerstore().PeerInfo(p)
			if h.Network().Connectedness(p) == network.Connected {
				connected = append(connected, ai)
			} else {
				known = append(known, ai)
			}
		}
	}
	rand.Shuffle(len(connected), func(i, j int) { connected[i], connected[j] = connected[j], connected[i] })
	rand.Shuffle(len(known), func(i, j int) { known[i], known[j] = known[j], known[i] })
	out := append(connected, known...)
	for _, b := range r.boot {
		if !seen[b.ID] {
			out = append(out, b)
		}
	}
	if len(out) > num {
		out = out[:num]
	}
	return out
}

// maxGuessRelays bounds the relays viaOurRelays offers for one peer.
const maxGuessRelays = 3

// viaOurRelays adds, for a peer that the DHT knows no relayed address
// for, a circuit address through each relay this node is connected to
// (at most maxGuessRelays): a home node's relayed address reaches the
// DHT only some seconds after its reservation, and the relays of a small
// network are the ones everybody uses. A relay where the peer holds no
// reservation refuses at once.
func (r relayedOK) viaOurRelays(p peer.ID) {
	for _, a := range r.Peerstore().Addrs(p) {
		if isRelayed(a) {
			return
		}
	}
	var guesses []ma.Multiaddr
	for _, rp := range r.Network().Peers() {
		if len(guesses) == maxGuessRelays {
			break
		}
		if rp == p || r.Network().Connectedness(rp) != network.Connected {
			continue
		}
		if ps, err := r.Peerstore().SupportsProtocols(rp, hopProto); err != nil || len(ps) == 0 {
			continue
		}
		a, err := ma.NewMultiaddr("/p2p/" + rp.String() + "/p2p-circuit")
		if err == nil {
			guesses = append(guesses, a)
		}
	}
	if len(guesses) > 0 {
		r.log.Debug("trying a peer through our relays", "peer", p, "addrs", guesses)
		r.Peerstore().AddAddrs(p, guesses, peerstore.TempAddrTTL)
	}
}

// relayedOK is the host that Host.LibP2P hands out: its NewStream may use
// a limited (relayed) connection. The swarm prefers a direct connection
// whenever one exists, so this only matters while the relay is the only
// path (or until hole punching gives a direct one).
//
// Before dialling a peer it is not connected to, it asks the DHT for
// the peer's current addresses unless it already knows a relayed one: a
// home node's relayed address appears only once it holds a reservation,
// after the records that carried its other addresses, and a renter's
// quote has seconds where a QUIC dial to an address that drops packets
// takes five to fail. When the peerstore holds no address another
// network could reach (only LAN and loopback ones), the dial waits for
// the answer; otherwise the lookup runs beside it, and a dial to what it
// finds joins the one in flight (the swarm hands the first connection to
// every dial of the peer).
type relayedOK struct {
	host.Host // routed: looks addresses up in the DHT when dials fail
	find      func(context.Context, peer.ID) (peer.AddrInfo, error)
	log       *slog.Logger
}

// findFirstWait bounds the DHT lookup before a dial.
const findFirstWait = 2 * time.Second

func (r relayedOK) Connect(ctx context.Context, ai peer.AddrInfo) error {
	ctx = network.WithAllowLimitedConn(ctx, "gleaner protocol")
	r.findFirst(ctx, ai.ID, ai.Addrs)
	return r.Host.Connect(ctx, ai)
}

func (r relayedOK) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	ctx = network.WithAllowLimitedConn(ctx, "gleaner protocol")
	if nodial, _ := network.GetNoDial(ctx); !nodial {
		r.findFirst(ctx, p, nil)
	}
	return r.Host.NewStream(ctx, p, pids...)
}

func (r relayedOK) findFirst(ctx context.Context, p peer.ID, given []ma.Multiaddr) {
	if r.find == nil || r.Network().Connectedness(p) != network.NotConnected {
		return
	}
	reachable := false
	for _, a := range append(given, r.Peerstore().Addrs(p)...) {
		if isRelayed(a) {
			return
		}
		reachable = reachable || manet.IsPublicAddr(a)
	}
	lookup := func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, findFirstWait)
		defer cancel()
		ai, err := r.find(ctx, p)
		r.log.Debug("looked a peer up before dialling it", "peer", p, "wait", !reachable, "addrs", ai.Addrs, "err", err)
		if err != nil || len(ai.Addrs) == 0 {
			return false
		}
		r.Peerstore().AddAddrs(p, ai.Addrs, peerstore.TempAddrTTL)
		return true
	}
	if !reachable {
		lookup(ctx)
		r.viaOurRelays(p)
		return
	}
	go func() {
		if lookup(ctx) && r.Network().Connectedness(p) == network.NotConnected {
			_ = r.Host.Connect(ctx, peer.AddrInfo{ID: p})
		}
	}()
}

// Relay liveness. A relay that dies (a crash, a pulled cable) sends
// nothing, so this node learns of it only when QUIC's idle timeout closes
// the connection, half a minute later; until then every relayed
// connection through it looks alive, and a renter re-attaching to a job
// opens its stream on one of them and waits in vain. So while this node
// holds relayed connections, it pings each relay they go through every
// relayCheckEvery and, when one does not answer within relayCheckWait,
// closes its connections to that relay, which ends the circuits through
// it: the next dial takes another relay or a direct path.
const (
	relayCheckEvery = 5 * time.Second
	relayCheckWait  = 5 * time.Second
)

func (h *Host) relayWatch() {
	defer h.wg.Done()
	t := time.NewTicker(relayCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		for relay, circuits := range h.relaysInUse() {
			var err error
			if h.h.Network().Connectedness(relay) != network.Connected {
				err = errors.New("no connection to the relay")
			} else {
				ctx, cancel := context.WithTimeout(network.WithNoDial(h.ctx, "relay check"), relayCheckWait)
				_, err = h.Ping(ctx, relay)
				cancel()
			}
			if err == nil || h.ctx.Err() != nil {
				continue
			}
			h.log.Info("a relay stopped answering; closing the connections through it", "relay", relay, "circuits", len(circuits), "err", err)
			_ = h.h.Network().ClosePeer(relay)
			for _, c := range circuits {
				_ = c.Close()
			}
		}
	}
}

// relaysInUse is the relays that this node's relayed connections go
// through, each with those connections.
func (h *Host) relaysInUse() map[peer.ID][]network.Conn {
	out := map[peer.ID][]network.Conn{}
	for _, c := range h.h.Network().Conns() {
		a := c.RemoteMultiaddr()
		if !isRelayed(a) {
			continue
		}
		if id, err := relayID(a); err == nil {
			out[id] = append(out[id], c)
		}
	}
	return out
}

// relayID is the relay's peer ID in .../p2p/<relay>/p2p-circuit/...
func relayID(a ma.Multiaddr) (peer.ID, error) {
	before, _ := ma.SplitFunc(a, func(c ma.Component) bool { return c.Protocol().Code == ma.P_CIRCUIT })
	v, err := before.ValueForProtocol(ma.P_P2P)
	if err != nil {
		return "", err
	}
	return peer.Decode(v)
}
