package data

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Redialling a fetch's sources (issue 37). A renter and a provider that
// share only a relay lose their connection whenever the relay resets the
// circuit under it, at its data limit (64 MiB each way by default) or its
// duration. Bitswap never dials a peer it lost, and with nothing else
// connecting the two the fetch would wait in vain. So while a fetch
// runs, a peer that sent it blocks and loses its last connection is
// dialled again (through a relay when that is the only way), a few times
// with a pause between. A direct connection that drops is redialled the
// same way: the peer served this fetch and may well serve the rest. A
// peer the node cut off for sending wrong blocks (OnBadPeer) is held off
// by the host's gater, so its redials fail at once.
const (
	redialTries = 3
	redialWait  = 10 * time.Second // one dial
	redialPause = time.Second      // between dials
)

// redialer watches the connections of one fetch's sources.
type redialer struct {
	x   *Exchange
	ctx context.Context // the fetch's: redials stop with it

	mu      sync.Mutex
	sources map[peer.ID]bool // peers that sent this fetch blocks
	dialing map[peer.ID]bool // a redial in flight
	nf      *network.NotifyBundle
}

// watchSources starts watching for a fetch that runs until ctx ends; the
// caller calls stop when it returns.
func (x *Exchange) watchSources(ctx context.Context) *redialer {
	r := &redialer{x: x, ctx: ctx, sources: map[peer.ID]bool{}, dialing: map[peer.ID]bool{}}
	r.nf = &network.NotifyBundle{DisconnectedF: r.disconnected}
	x.host.Network().Notify(r.nf)
	return r
}

func (r *redialer) stop() { r.x.host.Network().StopNotify(r.nf) }

// served notes that p sent this fetch a block.
func (r *redialer) served(p peer.ID) {
	r.mu.Lock()
	r.sources[p] = true
	r.mu.Unlock()
}

func (r *redialer) disconnected(n network.Network, c network.Conn) {
	p := c.RemotePeer()
	if n.Connectedness(p) != network.NotConnected || r.ctx.Err() != nil {
		return // another connection (a relayed one counts) remains
	}
	r.mu.Lock()
	start := r.sources[p] && !r.dialing[p]
	if start {
		r.dialing[p] = true
	}
	r.mu.Unlock()
	if !start {
		return
	}
	// A circuit's address is dialled again as it was: through the same
	// relay (the peer's other addresses are tried besides). A direct
	// connection's remote address may be a NAT's mapping that only
	// worked one way; the peerstore's addresses are the peer's own.
	ai := peer.AddrInfo{ID: p}
	if a := c.RemoteMultiaddr(); isCircuit(a) {
		ai.Addrs = []ma.Multiaddr{a}
	}
	go r.redial(ai)
}

func isCircuit(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

func (r *redialer) redial(ai peer.AddrInfo) {
	p := ai.ID
	defer func() {
		r.mu.Lock()
		delete(r.dialing, p)
		r.mu.Unlock()
	}()
	for try := 0; try < redialTries; try++ {
		ctx, cancel := context.WithTimeout(r.ctx, redialWait)
		err := r.x.host.Connect(network.WithAllowLimitedConn(ctx, "gleaner data"), ai)
		cancel()
		if err == nil {
			r.x.log.Debug("data: redialled a source that a fetch lost", "peer", p, "try", try+1)
			return
		}
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(redialPause):
		}
	}
}
