package data

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// anode is an exchange test peer whose bitswap serves only what its
// Access allows, and answers the access question.
type anode struct {
	*xnode
	acc *Access
}

func newANode(t *testing.T) *anode {
	t.Helper()
	n := &xnode{t: t, h: newHost(t), dir: filepath.Join(t.TempDir(), "blocks"), logs: &syncBuffer{}}
	n.s = openStore(t, n.dir, 1<<30)
	acc := NewAccess(n.s, 0)
	x, err := NewExchange(context.Background(), ExchangeConfig{
		Host: n.h, ProtocolPrefix: testPrefix, Store: n.s, Allow: acc.Allow,
		Log: slog.New(slog.NewTextHandler(n.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.x = x
	ServeAccess(n.h, testPrefix, acc, func(ctx context.Context, c cid.Cid) bool {
		has, _ := n.s.Blockstore().Has(ctx, c)
		return has
	})
	t.Cleanup(func() { acc.Close(); n.stop() })
	return &anode{xnode: n, acc: acc}
}

// TestPrivateByDefault: with real libp2p hosts and bitswap, data an owner
// adds is refused to a stranger (quickly, with an error that says it is
// refused), served to a peer it was granted to while the grant lasts and
// refused after it ends, and served to anyone once published.
func TestPrivateByDefault(t *testing.T) {
	owner, lessee, stranger := newANode(t), newANode(t), newANode(t)
	connect(t, lessee.h, owner.h)
	connect(t, stranger.h, owner.h)
	connect(t, stranger.h, lessee.h)
	src := testTree(t)
	root, err := owner.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}

	// A stranger: refused, well before its timeout, with the refusal named.
	began := time.Now()
	_, err = stranger.x.FetchFrom(fetchCtx(t, time.Minute), root, nil, nil)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("stranger's fetch of private data: %v, want a refusal", err)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("the refusal took %s; it should come in seconds, not at the timeout", took)
	}
	if has, _ := stranger.s.Blockstore().Has(context.Background(), root); has {
		t.Error("the stranger got the root block of private data")
	}
	if owner.acc.Refused() == 0 {
		t.Error("the owner counted no refused want")
	}

	// The lease's provider, granted for a short while: served.
	until := time.Now().Add(3 * time.Second)
	if err := owner.acc.Grant(context.Background(), lessee.h.ID(), root, until); err != nil {
		t.Fatal(err)
	}
	if _, err := lessee.x.FetchFrom(fetchCtx(t, 30*time.Second), root, []peer.ID{owner.h.ID()}, nil); err != nil {
		t.Fatalf("granted peer's fetch: %v", err)
	}
	sameTree(t, lessee.s, root, src)
	// The stranger is still refused, and cannot get it from the lessee
	// either: a node serves what it fetched only as its own owner allows.
	if _, err := stranger.x.FetchFrom(fetchCtx(t, 30*time.Second), root, nil, nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("stranger's fetch while the lessee holds a copy: %v, want a refusal", err)
	}

	// The grant ends: a fresh fetch by the same peer is refused.
	time.Sleep(time.Until(until) + 100*time.Millisecond)
	if owner.acc.Granted(lessee.h.ID(), root) || owner.acc.Tracked() != 0 {
		t.Fatalf("after its end the grant is still there (tracked %d blocks)", owner.acc.Tracked())
	}
	if err := lessee.s.Unpin(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if _, err := lessee.s.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := lessee.x.FetchFrom(fetchCtx(t, 30*time.Second), root, []peer.ID{owner.h.ID()}, nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("fetch after the grant ended: %v, want a refusal", err)
	}

	// Published: anyone gets it.
	if err := owner.acc.Publish(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.x.FetchFrom(fetchCtx(t, 30*time.Second), root, nil, nil); err != nil {
		t.Fatalf("stranger's fetch of published data: %v", err)
	}
}
