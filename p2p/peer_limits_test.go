package p2p

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// holdServer registers protocols hold/1..hold/n on h whose handlers count
// the streams they were given and hold them until the test ends.
type holdServer struct {
	accepted []atomic.Int64 // per protocol, streams handed to the handler
	done     chan struct{}
}

func newHoldServer(t *testing.T, h *Host, n int) *holdServer {
	hs := &holdServer{accepted: make([]atomic.Int64, n), done: make(chan struct{})}
	for i := range n {
		h.LibP2P().SetStreamHandler(holdProto(h, i), func(s network.Stream) {
			hs.accepted[i].Add(1)
			<-hs.done
			_ = s.Reset()
		})
	}
	t.Cleanup(func() { close(hs.done) })
	return hs
}

func holdProto(h *Host, i int) protocol.ID { return h.ProtocolID(fmt.Sprintf("hold%d/1", i)) }

func (hs *holdServer) total() int64 {
	var n int64
	for i := range hs.accepted {
		n += hs.accepted[i].Load()
	}
	return n
}

// openHeld opens count streams from h to to on protocol i, eight at a time,
// writing a byte on each so that the other side negotiates it; the
// streams stay open until the test ends.
func openHeld(t *testing.T, h, to *Host, i, count int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for range count {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := h.LibP2P().NewStream(ctx, to.ID(), holdProto(to, i))
			if err != nil {
				return // refused: what the limits are for
			}
			t.Cleanup(func() { _ = s.Reset() })
			_, _ = s.Write([]byte{1})
		})
	}
	wg.Wait()
}

// settle waits until f has not changed for half a second.
func settle(f func() int64) int64 {
	last := f()
	for range 40 {
		time.Sleep(500 * time.Millisecond)
		if now := f(); now == last {
			return now
		} else {
			last = now
		}
	}
	return last
}

// TestOnePeerGetsABoundedShareOfStreams: a peer that opens 100 streams on
// one of our protocols gets protoPeerStreamsIn of them; one that spreads
// 180 over six protocols gets at most peerStreamsIn in all; and another
// peer still gets its streams while the first holds its whole share.
func TestOnePeerGetsABoundedShareOfStreams(t *testing.T) {
	victim := newTestHost(t, "limits")
	hostile := newTestHost(t, "limits")
	honest := newTestHost(t, "limits")
	hs := newHoldServer(t, victim, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, h := range []*Host{hostile, honest} {
		if err := h.Connect(ctx, info(victim)); err != nil {
			t.Fatal(err)
		}
	}

	openHeld(t, hostile, victim, 0, 100)
	if got := settle(hs.accepted[0].Load); got != protoPeerStreamsIn {
		t.Fatalf("one peer, 100 streams on one protocol: %d accepted, want %d", got, protoPeerStreamsIn)
	}

	for i := 1; i <= 5; i++ {
		openHeld(t, hostile, victim, i, 30)
	}
	got := settle(hs.total)
	t.Logf("one peer, 100 + 5 x 30 streams on six protocols: %d accepted", got)
	// The peer's other inbound streams (DHT, gossipsub, identify) count
	// against its share too, so it gets a little less than peerStreamsIn.
	if got > peerStreamsIn || got < peerStreamsIn-16 {
		t.Fatalf("%d streams accepted from one peer, want at most and close to %d", got, peerStreamsIn)
	}

	before := hs.accepted[6].Load()
	openHeld(t, honest, victim, 6, 8)
	if n := settle(hs.accepted[6].Load) - before; n != 8 {
		t.Fatalf("an honest peer got %d of 8 streams while another held its share", n)
	}
}
