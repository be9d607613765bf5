package data

import (
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A fetch that stops with blocks still wanted (cancelled, or at its
// deadline) ends its bitswap sessions, and bitswap withdraws their wants
// a little later, from the sessions' own goroutines (issue 34). Until it
// has, a fetch of the same blocks that starts at once (a renter retrying
// a job fetch it cut short) can stall: bitswap's client records, for
// each peer, the wants it has sent, and sends a session's want only
// when none is recorded; a record is cleared only by a cancel, sent
// when no session wants the block any more. A block the peer sends for
// the ending session after its fetch stopped is dropped with that
// fetch, and since the new fetch's session already wants it, no cancel
// follows: the record stays, the new want is never sent, and the peer,
// which has answered, is not asked again until bitswap's rebroadcast
// (30 s and more). So a fetch that fails waits, briefly, for its wants
// to be withdrawn before it returns.
//
// Some records outlive their sessions altogether: in about one
// cancelled fetch in ten (TestExchangeRefetchAfterACancel), bitswap
// still holds, long after every session ended, wants that no session
// has (their source within boxo is not pinned down; a session's want
// sender racing its own cancels is the likely one). Such a record
// stalls any later fetch of the block the same way, so when the wait
// ends with wants still recorded, bitswap's client starts over with the
// peers that served the fetch (restartPeer), which clears their
// records; and a fetch that stalls rewantStall on blocks a fetch lately
// stopped wanting restarts it with every connected peer and wants them
// again (exchange.go, the stall check).
const (
	// withdrawWait bounds the wait: sessions end in milliseconds.
	withdrawWait = 200 * time.Millisecond
	withdrawPoll = 2 * time.Millisecond
)

// withdrawn waits until bitswap wants none of the blocks this fetch
// wanted that no other fetch wants, and clears the records that remain
// after withdrawWait. Called after forget, with the fetch's sessions
// ended.
func (f *fetch) withdrawn() {
	if len(f.asked) == 0 {
		return
	}
	deadline := time.Now().Add(withdrawWait)
	for f.x.stillWants(f.visited) {
		if f.x.isClosed() {
			return
		}
		if time.Now().After(deadline) {
			f.x.log.Debug("data: a stopped fetch's wants outlived its sessions; restarting bitswap with its sources", "root", f.root, "sources", len(f.peers))
			for p := range f.peers {
				if f.x.host.Network().Connectedness(p) != network.NotConnected {
					f.x.restartPeer(p)
				}
			}
			f.x.restarts.Add(1)
			return
		}
		time.Sleep(withdrawPoll)
	}
}

// stillWants says whether bitswap still wants, from some peer, a block
// of keys that no running fetch wants.
func (x *Exchange) stillWants(keys map[string]bool) bool {
	out := x.bs.GetWantlist()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range out {
		k := c.KeyString()
		if keys[k] && x.wanted[k] == 0 {
			return true
		}
	}
	return false
}

// restartPeer has bitswap's client drop p's message queue, with the
// record of the wants sent to p, and open a new one, which sends p the
// wants that are out again.
func (x *Exchange) restartPeer(p peer.ID) {
	x.bs.Client.PeerDisconnected(p)
	x.bs.Client.PeerConnected(p)
}

// staleWants is how long after a fetch stopped wanting a block another
// fetch that stalls on it suspects a record it left (above): longer
// than any wait for its sessions to end.
const staleWants = time.Minute

// stoppedWanting says whether some fetch stopped wanting one of keys
// after since.
func (x *Exchange) stoppedWanting(keys map[string]cid.Cid, since time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range keys {
		if at, ok := x.recent[k]; ok && at.After(since) {
			return true
		}
	}
	return false
}

// restartConnected restarts bitswap's client with every connected peer:
// the last resort for a fetch stalled on a record that outlived the
// fetch it was sent for, whose peer is not known.
func (x *Exchange) restartConnected() {
	for _, p := range x.host.Network().Peers() {
		x.restartPeer(p)
	}
}
