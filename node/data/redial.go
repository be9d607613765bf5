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
//
// A redialled source is then asked again, at once, for everything the
// fetch still wants. Bitswap would not ask it by itself for up to 45 s:
// its connection events are coalesced (boxo's ConnectEventManager keeps
// only a peer's latest state), so a reset and the redial that follows
// it within milliseconds may never reach bitswap as a disconnect, and the
// peer's message queue, which deems the wants on the broken stream sent,
// resends them only at its rebroadcast (wants older than 30 s, checked
// every 15 s). So after a redial the fetch tells bitswap's client that
// the peer left and came back (a fresh message queue, whose wantlist
// starts empty), and wants its missing blocks again in a new session,
// whose first wants go to every connected peer.
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
	lost    map[peer.ID]bool // lost its connections while a redial was in flight
	nf      *network.NotifyBundle
	// redialled is signalled after a source was dialled again: the
	// fetch then wants its missing blocks again.
	redialled chan struct{}
}

// watchSources starts watching for a fetch that runs until ctx ends; the
// caller calls stop when it returns.
func (x *Exchange) watchSources(ctx context.Context) *redialer {
	r := &redialer{x: x, ctx: ctx, sources: map[peer.ID]bool{}, dialing: map[peer.ID]bool{}, lost: map[peer.ID]bool{}, redialled: make(chan struct{}, 1)}
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
	if r.dialing[p] {
		r.lost[p] = true // the redial in flight looks again when it ends
	}
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
	for try := 0; try < redialTries; try++ {
		ctx, cancel := context.WithTimeout(r.ctx, redialWait)
		err := r.x.host.Connect(network.WithAllowLimitedConn(ctx, "gleaner data"), ai)
		cancel()
		if err == nil {
			r.x.log.Debug("data: redialled a source that a fetch lost", "peer", p, "try", try+1)
			r.rewant(p)
			// A circuit reset while this dial was finishing was not
			// redialled by disconnected (one redial at a time): its new
			// connection may be gone already, and is dialled again
			// within the same tries (a peer that drops every new
			// connection is not dialled without end).
			if r.doneDialing(p) {
				return
			}
			continue
		}
		select {
		case <-r.ctx.Done():
			r.giveUp(p)
			return
		case <-time.After(redialPause):
		}
	}
	r.giveUp(p)
}

// giveUp ends p's redial: the fetch's end or the tries spent.
func (r *redialer) giveUp(p peer.ID) {
	r.mu.Lock()
	delete(r.lost, p)
	delete(r.dialing, p)
	r.mu.Unlock()
}

// doneDialing ends p's redial unless p lost its connections meanwhile.
func (r *redialer) doneDialing(p peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost[p] && r.ctx.Err() == nil && r.x.host.Network().Connectedness(p) == network.NotConnected {
		delete(r.lost, p)
		return false
	}
	delete(r.lost, p)
	delete(r.dialing, p)
	return true
}

// rewant makes bitswap's client start over with p, a source that was
// just dialled again, and signals the fetch to want its missing blocks
// again (see above). A disconnect that bitswap hears later is followed
// by this connection's connect, which its event manager delivers last.
func (r *redialer) rewant(p peer.ID) {
	if r.x.noRewant {
		return
	}
	r.restart(p)
	select {
	case r.redialled <- struct{}{}:
	default: // one already pending covers this peer too
	}
}

// restart has bitswap's client start over with p (restartPeer).
func (r *redialer) restart(p peer.ID) { r.x.restartPeer(p) }

// kick restarts bitswap's client with each source that is connected.
func (r *redialer) kick() {
	r.mu.Lock()
	var ps []peer.ID
	for p := range r.sources {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	for _, p := range ps {
		if r.x.host.Network().Connectedness(p) != network.NotConnected {
			r.restart(p)
		}
	}
}
