package p2p

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	ma "github.com/multiformats/go-multiaddr"
)

// PeerEvent reports a peer connecting or disconnecting.
type PeerEvent struct {
	Type string // "connected" | "disconnected"
	Peer peer.ID
	Addr ma.Multiaddr // remote address of a live connection; nil on disconnect
	Time time.Time
}

// peerEventBuffer is per subscriber; a reader slower than this loses events
// (counted in DroppedPeerEvents) rather than stalling the host.
const peerEventBuffer = 128

// startEventLoop subscribes to the host's event bus. One goroutine owns the
// subscription and must stay quick: a slow bus reader stalls libp2p itself.
func (h *Host) startEventLoop() error {
	sub, err := h.h.EventBus().Subscribe([]any{
		new(event.EvtPeerConnectednessChanged),
		new(event.EvtPeerIdentificationCompleted),
		new(event.EvtLocalReachabilityChanged),
	}, eventbus.BufSize(256), eventbus.Name("gleaner-p2p"))
	if err != nil {
		return err
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer sub.Close()
		for {
			select {
			case <-h.ctx.Done():
				return
			case e, ok := <-sub.Out():
				if !ok {
					return
				}
				h.handleEvent(e)
			}
		}
	}()
	return nil
}

func (h *Host) handleEvent(e any) {
	switch e := e.(type) {
	case event.EvtPeerConnectednessChanged:
		pe := PeerEvent{Peer: e.Peer, Time: time.Now()}
		switch e.Connectedness {
		case network.Connected, network.Limited:
			pe.Type = "connected"
			if cs := h.h.Network().ConnsToPeer(e.Peer); len(cs) > 0 {
				pe.Addr = cs[0].RemoteMultiaddr()
			}
		case network.NotConnected:
			pe.Type = "disconnected"
		default:
			return
		}
		h.events.publish(pe)
	case event.EvtPeerIdentificationCompleted:
		h.nat.record(e.Conn, e.ObservedAddr)
		h.logReachability()
		if !h.speaksOurNetwork(e.Protocols) {
			go func() {
				if h.stillForeign(e.Peer) {
					h.rejectForeign(e.Peer)
				}
			}()
		}
	case event.EvtLocalReachabilityChanged:
		switch e.Reachability {
		case network.ReachabilityPublic:
			h.reach.Store("public")
		case network.ReachabilityPrivate:
			h.reach.Store("private")
		default:
			h.reach.Store("unknown")
		}
		h.logReachability()
	}
}

// logReachability logs the verdict when it changes, with its grounds and,
// in one sentence, what it means for the owner.
func (h *Host) logReachability() {
	s := h.NAT()
	if old, _ := h.lastVerdict.Swap(s.Verdict).(string); old == s.Verdict {
		return
	}
	meaning, _ := ReachabilityMeaning(s.Verdict)
	h.log.Info("reachability", "verdict", s.Verdict, "autonat", s.AutoNAT, "nat_mapping", s.Mapping,
		"observers", s.Observers, "relays", len(s.Relays), "meaning", meaning)
}

// SubscribePeerEvents streams connect/disconnect events until ctx is done or
// the host closes, then closes the channel. It never blocks the host.
func (h *Host) SubscribePeerEvents(ctx context.Context) (<-chan PeerEvent, error) {
	ch := make(chan PeerEvent, peerEventBuffer)
	id, ok := h.events.add(ch)
	if !ok {
		return nil, context.Canceled
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-h.ctx.Done():
		}
		h.events.remove(id)
	}()
	return ch, nil
}

// DroppedPeerEvents counts events lost to slow subscribers.
func (h *Host) DroppedPeerEvents() uint64 { return h.events.dropped.Load() }

// eventHub fans peer events out to subscribers without blocking.
type eventHub struct {
	mu      sync.Mutex // guards subs, next, closed; held while sending so no send hits a closed channel
	subs    map[int]chan PeerEvent
	next    int
	closed  bool
	dropped atomic.Uint64
}

func (e *eventHub) add(ch chan PeerEvent) (int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, false
	}
	if e.subs == nil {
		e.subs = make(map[int]chan PeerEvent)
	}
	e.next++
	e.subs[e.next] = ch
	return e.next, true
}

func (e *eventHub) remove(id int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ch, ok := e.subs[id]; ok {
		delete(e.subs, id)
		close(ch)
	}
}

func (e *eventHub) publish(pe PeerEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ch := range e.subs {
		select {
		case ch <- pe:
		default:
			e.dropped.Add(1)
		}
	}
}

func (e *eventHub) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for id, ch := range e.subs {
		delete(e.subs, id)
		close(ch)
	}
}
