package data

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multihash"
)

const testPrefix protocol.ID = "/gleaner/test"

// xnode is one peer of an exchange test: a libp2p host on loopback TCP,
// a store and an exchange.
type xnode struct {
	t    testing.TB
	h    host.Host
	dir  string
	s    *Store
	x    *Exchange
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func newHost(t testing.TB, opts ...libp2p.Option) host.Host {
	t.Helper()
	opts = append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay()}, opts...)
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func newXNode(t *testing.T, prefix protocol.ID, quota int64) *xnode {
	t.Helper()
	n := &xnode{t: t, h: newHost(t), dir: filepath.Join(t.TempDir(), "blocks"), logs: &syncBuffer{}}
	n.s = openStore(t, n.dir, quota)
	n.start(prefix)
	t.Cleanup(n.stop)
	return n
}

func (n *xnode) start(prefix protocol.ID) {
	n.t.Helper()
	x, err := NewExchange(context.Background(), ExchangeConfig{
		Host:           n.h,
		ProtocolPrefix: prefix,
		Store:          n.s,
		Log:            slog.New(slog.NewTextHandler(n.logs, nil)),
	})
	if err != nil {
		n.t.Fatal(err)
	}
	n.x = x
}

// stop closes the exchange and the store; the host stays.
func (n *xnode) stop() {
	if n.x != nil {
		n.x.Close()
		n.x = nil
	}
	if n.s != nil {
		n.s.Close()
		n.s = nil
	}
}

// restart is a daemon's restart: exchange, store and host closed, then
// opened again from the same directory with the same identity. Peers see
// the old connection end, so they drop what it wanted, as they would
// when a process dies.
func (n *xnode) restart(prefix protocol.ID, quota int64) {
	n.t.Helper()
	key := n.h.Peerstore().PrivKey(n.h.ID())
	n.stop()
	if err := n.h.Close(); err != nil {
		n.t.Fatal(err)
	}
	n.h = newHost(n.t, libp2p.Identity(key))
	n.s = openStore(n.t, n.dir, quota)
	n.start(prefix)
}

func connect(t testing.TB, a, b host.Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// testTree writes a directory with several files, one of them six
// chunks (1.5 MiB), and returns its path.
func testTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"big.bin":            noise(11, 6*ChunkSize), // 1.5 MiB, six chunks
		"README":             "inputs for the exchange test\n",
		"sub/labels.csv":     noise(12, 40_000),
		"sub/deeper/mid.bin": noise(13, ChunkSize+1),
		"sub/deeper/empty":   "",
	})
	return src
}

func fetchCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sameTree fails unless the export of root from s has the files of src.
func sameTree(t *testing.T, s *Store, root cid.Cid, src string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if err := Export(context.Background(), s.DAG(), root, out, testLimits); err != nil {
		t.Fatalf("export %s: %v", root, err)
	}
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: exported %d bytes differ from the %d added", rel, len(got), len(want))
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no files compared")
	}
}

func pinned(t *testing.T, s *Store, c cid.Cid) bool {
	t.Helper()
	pins, err := s.Pins(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pins {
		if p.Equals(c) {
			return true
		}
	}
	return false
}

func noPins(t *testing.T, s *Store) {
	t.Helper()
	pins, err := s.Pins(context.Background())
	if err != nil || len(pins) != 0 {
		t.Fatalf("pins %v (%v), want none", pins, err)
	}
}

func TestExchangeFetchFromPeer(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 64<<20)
	src := testTree(t)
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, a.h)
	var calls int
	var last FetchProgress
	res, err := b.x.Fetch(fetchCtx(t, 30*time.Second), root, func(p FetchProgress) {
		if p.Blocks < last.Blocks || p.Bytes < last.Bytes {
			t.Errorf("progress went back: %+v after %+v", p, last)
		}
		calls++
		last = p
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Root.Equals(root) || res.Peers != 1 || res.Blocks < 9 || res.Bytes < 1_800_000 {
		t.Fatalf("result %+v", res)
	}
	if calls == 0 || last.Blocks != res.Blocks || last.Bytes != res.Bytes {
		t.Fatalf("%d progress calls, last %+v, result %+v", calls, last, res)
	}
	if b.s.Used() != a.s.Used() {
		t.Fatalf("fetcher stores %d bytes, adder %d", b.s.Used(), a.s.Used())
	}
	sameTree(t, b.s, root, src)
	if !pinned(t, b.s, root) {
		t.Fatal("root not pinned after fetch")
	}
	// GC keeps everything: the pin reaches it all.
	if r, err := b.s.GC(context.Background()); err != nil || r.Removed != 0 {
		t.Fatalf("GC after fetch: %+v %v", r, err)
	}
	// A second fetch finds it all locally and asks no peer.
	again, err := b.x.Fetch(fetchCtx(t, 5*time.Second), root, nil)
	if err != nil || again.Blocks != res.Blocks || again.Peers != 0 {
		t.Fatalf("refetch: %+v %v", again, err)
	}
}

func TestExchangeFetchFromThirdPeer(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 64<<20)
	c := newXNode(t, testPrefix, 64<<20)
	src := testTree(t)
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, a.h)
	if _, err := b.x.Fetch(fetchCtx(t, 30*time.Second), root, nil); err != nil {
		t.Fatal(err)
	}
	a.stop()
	if err := a.h.Close(); err != nil {
		t.Fatal(err)
	}
	connect(t, c.h, b.h)
	res, err := c.x.Fetch(fetchCtx(t, 30*time.Second), root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Peers != 1 {
		t.Fatalf("result %+v: want blocks from one peer, B", res)
	}
	sameTree(t, c.s, root, src)
	if !pinned(t, c.s, root) {
		t.Fatal("root not pinned on C")
	}
}

func randomCID(t *testing.T, seed uint64) cid.Cid {
	h, err := multihash.Sum([]byte(noise(seed, 64)), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(cid.Raw, h)
}

// notFound checks err is a timely ErrNotFound naming want.
func notFound(t *testing.T, err error, want cid.Cid, start time.Time, deadline time.Duration) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fetch: %v, want ErrNotFound at the deadline", err)
	}
	if !strings.Contains(err.Error(), want.String()) {
		t.Fatalf("error %q does not name the missing block %s", err, want)
	}
	if el := time.Since(start); el > deadline+3*time.Second {
		t.Fatalf("failed after %v with a %v deadline", el, deadline)
	}
}

func TestExchangeUnservable(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 64<<20)
	if _, err := a.s.Add(context.Background(), testTree(t)); err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, a.h)
	missing := randomCID(t, 99)
	start := time.Now()
	_, err := b.x.Fetch(fetchCtx(t, 2*time.Second), missing, nil)
	notFound(t, err, missing, start, 2*time.Second)
	noPins(t, b.s)
	if _, err := b.x.Fetch(context.Background(), cid.Undef, nil); err == nil {
		t.Fatal("fetch of an undefined CID succeeded")
	}
}

func TestExchangeQuota(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 1<<20) // the tree is about 1.9 MiB
	root, err := a.s.Add(context.Background(), testTree(t))
	if err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, a.h)
	_, err = b.x.Fetch(fetchCtx(t, 30*time.Second), root, nil)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("fetch of 1.9 MiB into a 1 MiB store: %v, want ErrQuota", err)
	}
	noPins(t, b.s)
	if b.s.Used() > b.s.Quota() {
		t.Fatalf("used %d past the quota %d", b.s.Used(), b.s.Quota())
	}
}

// corruptBlockstore serves other bytes than the CID names: a hostile or
// broken peer.
type corruptBlockstore struct{ blockstore.Blockstore }

func (c corruptBlockstore) Get(ctx context.Context, k cid.Cid) (blocks.Block, error) {
	b, err := c.Blockstore.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	data := append([]byte(nil), b.RawData()...)
	if len(data) == 0 {
		data = []byte{0}
	} else {
		data[len(data)/2] ^= 0xff
	}
	return blocks.NewBlockWithCid(data, k)
}

// corruptPeer is a node holding src whose exchange serves from a
// blockstore that alters what it reads (the store under it is intact).
func corruptPeer(t *testing.T, src string) (*xnode, cid.Cid) {
	t.Helper()
	evil := newXNode(t, testPrefix, 64<<20)
	root, err := evil.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	evil.x.Close()
	evil.s.bs = corruptBlockstore{evil.s.bs}
	evil.start(testPrefix)
	return evil, root
}

func TestExchangeWrongBlocks(t *testing.T) {
	src := testTree(t)
	evil, root := corruptPeer(t, src)

	b := newXNode(t, testPrefix, 64<<20)
	connect(t, b.h, evil.h)
	start := time.Now()
	_, err := b.x.Fetch(fetchCtx(t, 3*time.Second), root, nil)
	notFound(t, err, root, start, 3*time.Second)
	if b.s.Used() != 0 {
		t.Fatalf("fetcher stored %d bytes of corrupt blocks", b.s.Used())
	}
	noPins(t, b.s)
	if !strings.Contains(b.logs.String(), evil.h.ID().String()) {
		t.Fatalf("no warning about the corrupting peer %s; log:\n%s", evil.h.ID(), b.logs.String())
	}

	// With an honest peer there too, the fetch succeeds and the store
	// holds only the true bytes.
	honest := newXNode(t, testPrefix, 64<<20)
	if _, err := honest.s.Add(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, honest.h)
	if _, err := b.x.Fetch(fetchCtx(t, 60*time.Second), root, nil); err != nil {
		t.Fatal(err)
	}
	sameTree(t, b.s, root, src)
	if b.s.Used() != honest.s.Used() {
		t.Fatalf("fetcher stores %d bytes, the honest peer %d", b.s.Used(), honest.s.Used())
	}
}

func TestExchangeProtocolPrefix(t *testing.T) {
	a := newXNode(t, "/gleaner/net-a", 64<<20)
	b := newXNode(t, "/gleaner/net-b", 64<<20)
	root, err := a.s.Add(context.Background(), testTree(t))
	if err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, a.h)
	start := time.Now()
	_, err = b.x.Fetch(fetchCtx(t, 2*time.Second), root, nil)
	notFound(t, err, root, start, 2*time.Second)
	noPins(t, b.s)
	if _, err := NewExchange(context.Background(), ExchangeConfig{Host: b.h, Store: b.s}); err == nil {
		t.Fatal("exchange without a protocol prefix was accepted")
	}
}

func TestExchangeSurvivesRestart(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 64<<20)
	c := newXNode(t, testPrefix, 64<<20)
	src := testTree(t)
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	writeFiles(t, other, map[string]string{"c.txt": noise(21, 300_000)})
	otherRoot, err := c.s.Add(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, a.h)
	connect(t, c.h, b.h) // stays up across B's restart
	if _, err := b.x.Fetch(fetchCtx(t, 30*time.Second), root, nil); err != nil {
		t.Fatal(err)
	}
	a.stop()
	a.h.Close()

	b.stop()
	b.s = openStore(t, b.dir, 64<<20)
	if !pinned(t, b.s, root) {
		t.Fatal("pin lost across the restart")
	}
	sameTree(t, b.s, root, src)
	b.start(testPrefix)

	// B serves what it fetched before the restart...
	if _, err := c.x.Fetch(fetchCtx(t, 30*time.Second), root, nil); err != nil {
		t.Fatal(err)
	}
	sameTree(t, c.s, root, src)
	// ...and its new exchange asks peers connected before it started.
	if _, err := b.x.Fetch(fetchCtx(t, 30*time.Second), otherRoot, nil); err != nil {
		t.Fatal(err)
	}
	sameTree(t, b.s, otherRoot, other)
}

// A GC that starts while a fetch runs waits for its pin: nothing fetched
// is swept.
func TestExchangeGCDuringFetch(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 64<<20)
	src := testTree(t)
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	connect(t, b.h, a.h)
	gcDone := make(chan GCResult, 1)
	var once sync.Once
	_, err = b.x.Fetch(fetchCtx(t, 30*time.Second), root, func(FetchProgress) {
		once.Do(func() {
			go func() {
				r, err := b.s.GC(context.Background())
				if err != nil {
					t.Error(err)
				}
				gcDone <- r
			}()
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-gcDone:
		if r.Removed != 0 {
			t.Fatalf("GC during the fetch removed %d blocks", r.Removed)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("GC did not finish after the fetch")
	}
	sameTree(t, b.s, root, src)
}
