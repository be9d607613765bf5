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
	"github.com/multiformats/go-multihash"
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

// TestAccessBlockSets: Access's bookkeeping without a network. A grant
// covers every block of its root (not just the root), for that peer only;
// two peers granted one root keep separate grants; a block shared with a
// public root is served to anyone, and stops being so when that root is
// unpublished; the bound refuses a DAG that would pass it, and
// everything let go leaves nothing tracked.
func TestAccessBlockSets(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 1<<30)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"shared.bin": noise(21, 3*ChunkSize), "secret.txt": "private"})
	root, err := s.Add(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	pubDir := t.TempDir()
	writeFiles(t, pubDir, map[string]string{"copy.bin": noise(21, 3*ChunkSize)})
	pub, err := s.Add(ctx, pubDir)
	if err != nil {
		t.Fatal(err)
	}
	var all []blockKey
	all, err = walkBlocks(ctx, storeGetter{s}, root, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 5 {
		t.Fatalf("the test DAG has %d blocks; want a root, a file node, leaves", len(all))
	}
	a, b, c := ed25519ID(t), ed25519ID(t), ed25519ID(t)
	acc := NewAccess(s, 0)
	defer acc.Close()
	until := time.Now().Add(time.Hour)
	if err := acc.Grant(ctx, a, root, until); err != nil {
		t.Fatal(err)
	}
	if err := acc.Grant(ctx, b, root, until); err != nil {
		t.Fatal(err)
	}
	allowedAll := func(p peer.ID) bool {
		for _, k := range all {
			if !acc.may(p, cid.NewCidV1(cid.Raw, mhOf(t, k))) {
				return false
			}
		}
		return true
	}
	if !allowedAll(a) || !allowedAll(b) {
		t.Fatal("a grant does not cover every block of its root")
	}
	if acc.Allow(c, root) {
		t.Fatal("a peer without a grant is allowed the root")
	}
	acc.Revoke(a, root)
	if acc.Allow(a, root) || !allowedAll(b) {
		t.Fatal("revoking one peer's grant changed another's, or did not end its own")
	}
	// The shared file's leaves are public through pub; the secret is not.
	if err := acc.Publish(ctx, pub); err != nil {
		t.Fatal(err)
	}
	secret, err := s.Add(ctx, filepath.Join(dir, "secret.txt"))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := s.Add(ctx, filepath.Join(dir, "shared.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !acc.Allow(c, shared) || acc.Allow(c, secret) {
		t.Fatalf("with a public copy: shared file served %v (want true), secret served %v (want false)", acc.Allow(c, shared), acc.Allow(c, secret))
	}
	acc.Unpublish(pub)
	if acc.Allow(c, shared) {
		t.Fatal("the shared file is still public after its public root was unpublished")
	}
	acc.Revoke(b, root)
	if n := acc.Tracked(); n != 0 {
		t.Fatalf("%d blocks still tracked with nothing granted or public", n)
	}
	small := NewAccess(s, 3)
	defer small.Close()
	if err := small.Grant(ctx, a, root, until); !errors.Is(err, ErrAccessIndexFull) {
		t.Fatalf("a DAG past the bound: %v, want ErrAccessIndexFull", err)
	}
}

func ed25519ID(t *testing.T) peer.ID {
	_, id := ed25519Key(t)
	return id
}

func mhOf(t *testing.T, k blockKey) multihash.Multihash {
	h, err := multihash.Encode(k[:], multihash.SHA2_256)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
