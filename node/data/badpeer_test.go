package data

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A peer that keeps sending wrong bytes is reported, once it has struck
// BadBlockStrikes times, so that the node can disconnect it; an honest
// peer is never reported.
func TestExchangeReportsABadPeer(t *testing.T) {
	src := testTree(t)
	evil, root := corruptPeer(t, src)
	honest := newXNode(t, testPrefix, 64<<20)
	if _, err := honest.s.Add(context.Background(), src); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	reported := map[peer.ID]int{}
	b := newXNode(t, testPrefix, 64<<20)
	b.x.Close()
	x, err := NewExchange(context.Background(), ExchangeConfig{Host: b.h, ProtocolPrefix: testPrefix, Store: b.s, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnBadPeer: func(p peer.ID) {
			mu.Lock()
			reported[p]++
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	b.x = x
	// Only the evil peer first: every block it sends is wrong.
	connect(t, b.h, evil.h)
	if _, err := b.x.Fetch(fetchCtx(t, 3*time.Second), root, nil); err == nil {
		t.Fatal("a fetch from a peer serving only wrong bytes succeeded")
	}
	mu.Lock()
	if reported[evil.h.ID()] == 0 {
		t.Errorf("the peer that served wrong bytes was never reported")
	}
	mu.Unlock()
	// With an honest peer, the fetch succeeds, and the honest peer is
	// never reported.
	connect(t, b.h, honest.h)
	if _, err := b.x.Fetch(fetchCtx(t, 60*time.Second), root, nil); err != nil {
		t.Fatal(err)
	}
	sameTree(t, b.s, root, src)
	mu.Lock()
	defer mu.Unlock()
	if reported[honest.h.ID()] != 0 {
		t.Errorf("the honest peer was reported %d times", reported[honest.h.ID()])
	}
}
