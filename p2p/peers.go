package p2p

import (
	"context"
	"errors"
	"fmt"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	ma "github.com/multiformats/go-multiaddr"
)

// PeerInfo describes one connected peer.
type PeerInfo struct {
	ID        peer.ID
	Addrs     []ma.Multiaddr // remote addresses of the live connections
	Direction string         // "inbound" | "outbound" (of the first connection)
	Latency   time.Duration  // EWMA of pings; 0 if unknown
	Transport string         // "tcp" | "quic" | "relay" | "other"
}

// ErrNotConnected is returned by Disconnect for a peer with no connection.
var ErrNotConnected = errors.New("p2p: not connected to peer")

// Connect dials ai and waits for identify. A peer that turns out to belong
// to another network is disconnected and ErrForeignPeer returned.
func (h *Host) Connect(ctx context.Context, ai peer.AddrInfo) error {
	if ai.ID == h.h.ID() {
		return errors.New("p2p: cannot connect to self")
	}
	if h.isForeign(ai.ID) {
		return ErrForeignPeer
	}
	if h.gater != nil {
		h.gater.release(ai.ID) // an explicit Connect overrides an earlier Disconnect
	}
	if err := h.h.Connect(ctx, ai); err != nil {
		return err
	}
	// Connect returns at once when a connection already existed (the
	// other side dialled first), possibly before identify finished on it;
	// wait for identify on every connection so the verdict below is never
	// taken on an empty protocol list.
	h.awaitIdentify(ctx, ai.ID)
	// libp2p's Connect returns after identify, so the protocol list is
	// known; the event loop would also catch this, but callers deserve an
	// error rather than a connection that silently vanishes.
	// An empty protocol list means identify itself failed (timeout under
	// load): that says nothing about the peer's network, so it is an error
	// but not grounds to blacklist.
	all, err := h.h.Peerstore().GetProtocols(ai.ID)
	if err != nil || len(all) == 0 {
		return fmt.Errorf("p2p: identify with %s did not complete", ai.ID)
	}
	if !h.speaksOurNetwork(all) && h.stillForeign(ai.ID) {
		h.rejectForeign(ai.ID)
		return ErrForeignPeer
	}
	return nil
}

// ConnectNow is Connect for a dial a person asked for: it first forgets
// earlier failed dials to the peer, which libp2p otherwise refuses to
// retry for a while ("dial backoff"); a user retrying by hand has usually
// just fixed what made the dial fail.
func (h *Host) ConnectNow(ctx context.Context, ai peer.AddrInfo) error {
	if sw, ok := h.h.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(ai.ID)
	}
	return h.Connect(ctx, ai)
}

// disconnectHold is how long a disconnected peer stays disconnected unless
// Connect is called for it: DHT routing-table maintenance on either side
// would otherwise dial it straight back.
const disconnectHold = 30 * time.Second

// Disconnect closes all connections to id and keeps it away for
// disconnectHold.
func (h *Host) Disconnect(id peer.ID) error {
	if len(h.h.Network().ConnsToPeer(id)) == 0 {
		return fmt.Errorf("%w: %s", ErrNotConnected, id)
	}
	if h.gater != nil {
		h.gater.hold(id, disconnectHold)
	}
	return h.h.Network().ClosePeer(id)
}

// Ping measures one round trip with the libp2p ping protocol.
func (h *Host) Ping(ctx context.Context, id peer.ID) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the ping stream after the first result
	select {
	case r, ok := <-ping.Ping(ctx, h.h, id):
		if !ok {
			return 0, ctx.Err()
		}
		return r.RTT, r.Error
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Peers lists the connected peers.
func (h *Host) Peers() []PeerInfo {
	byPeer := make(map[peer.ID]int)
	var out []PeerInfo
	for _, c := range h.h.Network().Conns() {
		p := c.RemotePeer()
		i, ok := byPeer[p]
		if !ok {
			i = len(out)
			byPeer[p] = i
			out = append(out, PeerInfo{
				ID:        p,
				Direction: direction(c.Stat().Direction),
				Latency:   h.h.Peerstore().LatencyEWMA(p),
				Transport: transportName(c.RemoteMultiaddr()),
			})
		}
		out[i].Addrs = append(out[i].Addrs, c.RemoteMultiaddr())
	}
	return out
}

func direction(d network.Direction) string {
	switch d {
	case network.DirInbound:
		return "inbound"
	case network.DirOutbound:
		return "outbound"
	}
	return "unknown"
}

func transportName(a ma.Multiaddr) string {
	has := func(code int) bool { _, err := a.ValueForProtocol(code); return err == nil }
	switch {
	case has(ma.P_CIRCUIT):
		return "relay"
	case has(ma.P_QUIC_V1):
		return "quic"
	case has(ma.P_TCP):
		return "tcp"
	}
	return "other"
}

// awaitIdentify waits, bounded by ctx, until identify has run on every
// connection to p. Hosts without an identify service (mocknet) return at once.
func (h *Host) awaitIdentify(ctx context.Context, p peer.ID) {
	ider, ok := h.h.(interface{ IDService() identify.IDService })
	if !ok || ider.IDService() == nil {
		return
	}
	for _, c := range h.h.Network().ConnsToPeer(p) {
		select {
		case <-ider.IDService().IdentifyWait(c):
		case <-ctx.Done():
			return
		}
	}
}

// Paths to a peer, as PathTo reports them.
const (
	PathDirect  = "direct"  // at least one connection that no relay carries
	PathRelayed = "relayed" // every connection runs through a relay (/p2p-circuit)
)

// PathTo is how this host reaches p now: PathDirect, PathRelayed, or ""
// when it holds no connection to p (a job between streams, a provider
// gone). A renter shows it beside a job, so that an owner whose provider
// is relayed-only learns it from `job status`, not from slow transfers.
func (h *Host) PathTo(p peer.ID) string {
	conns := h.h.Network().ConnsToPeer(p)
	if len(conns) == 0 {
		return ""
	}
	for _, c := range conns {
		if !isRelayed(c.RemoteMultiaddr()) {
			return PathDirect
		}
	}
	return PathRelayed
}
