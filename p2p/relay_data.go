package p2p

import (
	"context"
	"reflect"
	"sync"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// A job's data over a relay (issue 37). Bitswap (boxo's bsnet) keeps off
// limited connections, which is what a relay's circuits are: its
// notifiee drops a limited connection's Connected event, so bitswap never
// learns of a peer it reaches only through a relay and never asks it for
// a block, and it opens its streams without WithAllowLimitedConn. For
// IPFS that is right (a public relay should not carry bulk data), but a
// gleaner renter and a provider that are both behind NATs hole punching
// cannot cross share nothing but a relayed connection, and their job's
// inputs and outputs must go over it or not at all. The relays gleaner
// nodes use are gleaner nodes that offer to carry jobs (--relay) and
// bound what one circuit carries (RelayCircuitData).
//
// DataOverRelays is the host to hand such a library: the same host, but
// its streams and dials may use a limited connection, and its network
// reports a peer reached only through a relay as connected, to
// Connectedness and to the notifiees registered through it. The swarm
// still opens each new stream on a direct connection when there is one
// (it ranks unlimited connections first), so a relay carries data only
// while it is the only path.

// DataOverRelays wraps h as above.
func DataOverRelays(h host.Host) host.Host {
	return &limitedOKHost{Host: h, net: &limitedOKNet{Network: h.Network(), wrapped: map[network.Notifiee]*limitedOKNotifiee{}}}
}

type limitedOKHost struct {
	host.Host
	net *limitedOKNet
}

func (h *limitedOKHost) Network() network.Network { return h.net }

func (h *limitedOKHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	return h.Host.NewStream(network.WithAllowLimitedConn(ctx, "gleaner data"), p, pids...)
}

// Connect returns at once when a relayed connection exists: without the
// flag basichost would dial the peer again for a direct one, which
// behind a symmetric NAT takes its whole timeout to fail.
func (h *limitedOKHost) Connect(ctx context.Context, ai peer.AddrInfo) error {
	return h.Host.Connect(network.WithAllowLimitedConn(ctx, "gleaner data"), ai)
}

// limitedOKNet is the network DataOverRelays' host shows its user.
type limitedOKNet struct {
	network.Network
	mu      sync.Mutex
	wrapped map[network.Notifiee]*limitedOKNotifiee // by what the user registered; guarded by mu
}

// Connectedness reports a peer reached only through a relay as
// connected.
func (n *limitedOKNet) Connectedness(p peer.ID) network.Connectedness {
	c := n.Network.Connectedness(p)
	if c == network.Limited {
		return network.Connected
	}
	return c
}

func (n *limitedOKNet) NewStream(ctx context.Context, p peer.ID) (network.Stream, error) {
	return n.Network.NewStream(network.WithAllowLimitedConn(ctx, "gleaner data"), p)
}

// Notify registers f so that it sees limited connections as ordinary
// ones, and this network (not the host's) in its callbacks. A notifiee
// of a type that cannot be a map key (a NotifyBundle passed by value)
// could not be found again by StopNotify, so it is registered as it is.
func (n *limitedOKNet) Notify(f network.Notifiee) {
	if f == nil || !reflect.TypeOf(f).Comparable() {
		n.Network.Notify(f)
		return
	}
	n.mu.Lock()
	w, ok := n.wrapped[f]
	if !ok {
		w = &limitedOKNotifiee{inner: f, net: n}
		n.wrapped[f] = w
	}
	n.mu.Unlock()
	if !ok {
		n.Network.Notify(w)
	}
}

func (n *limitedOKNet) StopNotify(f network.Notifiee) {
	if f == nil || !reflect.TypeOf(f).Comparable() {
		n.Network.StopNotify(f)
		return
	}
	n.mu.Lock()
	w, ok := n.wrapped[f]
	delete(n.wrapped, f)
	n.mu.Unlock()
	if ok {
		n.Network.StopNotify(w)
	}
}

// limitedOKNotifiee passes the swarm's events on with limited
// connections shown as unlimited.
type limitedOKNotifiee struct {
	inner network.Notifiee
	net   network.Network
}

func (w *limitedOKNotifiee) Listen(_ network.Network, a ma.Multiaddr) { w.inner.Listen(w.net, a) }
func (w *limitedOKNotifiee) ListenClose(_ network.Network, a ma.Multiaddr) {
	w.inner.ListenClose(w.net, a)
}
func (w *limitedOKNotifiee) Connected(_ network.Network, c network.Conn) {
	w.inner.Connected(w.net, unlimitedConn{c})
}
func (w *limitedOKNotifiee) Disconnected(_ network.Network, c network.Conn) {
	w.inner.Disconnected(w.net, unlimitedConn{c})
}

// unlimitedConn is a connection whose Stat says it is not limited; all
// else, streams included, is the connection's own.
type unlimitedConn struct{ network.Conn }

func (c unlimitedConn) Stat() network.ConnStats {
	s := c.Conn.Stat()
	s.Limited = false
	return s
}
