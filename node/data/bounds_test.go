package data

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/data/datatest"
	"github.com/ipfs/boxo/ipld/merkledag"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// The input bomb: 2,000 entries linking one 256 KiB leaf are two blocks
// in the store and 500 MiB once written out. Expand counts the leaf every
// time it is linked, and stops as soon as the running total passes its
// bound, without reading the leaf 2,000 times.
func TestExpandCountsARepeatedBlockEveryTime(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	bomb, err := datatest.RepeatedFolder(ctx, s.DAG(), 1, 2000, ChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	if s.Used() > 1<<20 {
		t.Fatalf("the bomb takes %d bytes in the store, want under 1 MiB", s.Used())
	}
	sz, err := s.Expand(ctx, bomb, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if sz.Bytes < 2000*ChunkSize || sz.Entries != 2000 || sz.Depth != 1 {
		t.Fatalf("expanded %+v, want at least %d bytes, 2000 entries, depth 1", sz, 2000*ChunkSize)
	}
	began := time.Now()
	_, err = s.Expand(ctx, bomb, 100<<20)
	var se *SizeError
	if !errors.As(err, &se) || !errors.Is(err, ErrTooLarge) || !se.Expanded || se.Limit != 100<<20 || se.Bytes > 100<<20+ChunkSize {
		t.Fatalf("expand within 100 MiB: %v (%+v), want a SizeError that stopped at the bound", err, se)
	}
	if !strings.Contains(err.Error(), "more than 104857600 bytes once written out") {
		t.Errorf("error %q does not say the bound", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("refusing the bomb took %v", d)
	}
}

// deepFolder is datatest.DeepFolder in s, written in one batch.
func deepFolder(t *testing.T, s *Store, depth int) (cid.Cid, error) {
	t.Helper()
	ctx := context.Background()
	b := ipld.NewBatch(ctx, s.DAG())
	c, err := datatest.DeepFolder(ctx, b, depth)
	if err != nil {
		return c, err
	}
	return c, b.Commit()
}

// Depth is bounded at MaxFolderDepth levels of folders, whatever the
// route; the walk of a 3,000-deep chain ends at the bound.
func TestExpandBoundsDepth(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	ok, err := deepFolder(t, s, MaxFolderDepth)
	if err != nil {
		t.Fatal(err)
	}
	if sz, err := s.Expand(ctx, ok, 1<<20); err != nil || sz.Depth != MaxFolderDepth {
		t.Fatalf("%d levels: %+v, %v; want accepted at depth %d", MaxFolderDepth, sz, err, MaxFolderDepth)
	}
	for _, depth := range []int{MaxFolderDepth + 1, 3000} {
		deep, err := deepFolder(t, s, depth)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Expand(ctx, deep, 1<<20)
		if !errors.Is(err, ErrTooDeep) || !strings.Contains(err.Error(), "folder deeper than 64 levels") {
			t.Errorf("%d levels: %v, want ErrTooDeep naming 64 levels", depth, err)
		}
	}
	// A chain that is shallow where first met and deep elsewhere: the
	// memo of a block measured once must still count its depth where it
	// is met again, deeper.
	sixty, err := deepFolder(t, s, 60)
	if err != nil {
		t.Fatal(err)
	}
	n60, err := s.DAG().Get(ctx, sixty)
	if err != nil {
		t.Fatal(err)
	}
	var under ipld.Node = n60
	for range 10 {
		if under, err = datatest.Folder(ctx, s.DAG(), []string{"d"}, []ipld.Node{under}); err != nil {
			t.Fatal(err)
		}
	}
	both, err := datatest.Folder(ctx, s.DAG(), []string{"a", "b"}, []ipld.Node{n60, under})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expand(ctx, both.Cid(), 1<<20); !errors.Is(err, ErrTooDeep) {
		t.Errorf("a block met shallow, then 10 levels deeper: %v, want ErrTooDeep", err)
	}
}

// Width: 1,100 entries each the same folder of 1,000 files are a few
// blocks and 1.1 million entries to write out.
func TestExpandBoundsEntries(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	wide, err := datatest.WideFolder(ctx, s.DAG(), 1100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = s.Expand(ctx, wide, 1<<40)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d entries", MaxEntries)) {
		t.Fatalf("expand: %v, want ErrTooLarge naming %d entries", err, MaxEntries)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("refusing took %v", d)
	}
}

// A sharded (HAMT) folder's inner shards are not levels: its entries sit
// one level below it, as in the folder it stands for.
func TestExpandCountsAShardedFolderAsOneLevel(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 256<<20)
	defer s.Close()
	leaf, err := datatest.Leaf(ctx, s.DAG(), 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := uio.NewDirectory(s.DAG(), uio.WithCidBuilder(merkledag.V1CidPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	const n = 4000
	pad := strings.Repeat("x", 80)
	for i := range n {
		if err := dir.AddChild(ctx, fmt.Sprintf("%s-%05d", pad, i), leaf); err != nil {
			t.Fatal(err)
		}
	}
	big, err := dir.GetNode()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DAG().Add(ctx, big); err != nil {
		t.Fatal(err)
	}
	if _, ok := dir.(*uio.HAMTDirectory); !ok {
		if _, err := uio.NewHAMTDirectoryFromNode(s.DAG(), big); err != nil {
			t.Fatalf("%d entries did not make a sharded folder (%T)", n, dir)
		}
	}
	top, err := datatest.Folder(ctx, s.DAG(), []string{"sub"}, []ipld.Node{big})
	if err != nil {
		t.Fatal(err)
	}
	sz, err := s.Expand(ctx, top.Cid(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if sz.Depth != 2 || sz.Entries != n+1 {
		t.Fatalf("expanded %+v, want depth 2 and %d entries", sz, n+1)
	}
}

// A bounded fetch stops once the bytes of the blocks that arrived pass
// its bound, pins nothing, and leaves the store well short of the DAG.
func TestFetchWithinStopsAtItsBound(t *testing.T) {
	a := newXNode(t, testPrefix, 256<<20)
	b := newXNode(t, testPrefix, 256<<20)
	connect(t, b.h, a.h)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"big.bin": noise(21, 64*ChunkSize)}) // 16 MiB
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{MaxBytes: 4 << 20}, nil)
	var se *SizeError
	if !errors.As(err, &se) || se.Expanded || se.Limit != 4<<20 {
		t.Fatalf("fetch within 4 MiB: %v, want a SizeError of the fetch", err)
	}
	noPins(t, b.s)
	// At most one store write (putBatch blocks) past the bound.
	if used := b.s.Used(); used > 4<<20+putBatch*ChunkSize+64<<10 {
		t.Errorf("%d bytes stored, want the fetch stopped near 4 MiB", used)
	}
	// The same DAG within a bound it fits is fetched and pinned. (By
	// another node: a second fetch of blocks a cancelled fetch wanted,
	// over the same connection, now and then waits for some of them
	// until its deadline: the exchange's, a plain Fetch does it too.)
	c := newXNode(t, testPrefix, 256<<20)
	connect(t, c.h, a.h)
	res, err := c.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{MaxBytes: 32 << 20}, nil)
	if err != nil || res.Bytes < 16<<20 || !pinned(t, c.s, root) {
		t.Fatalf("fetch within 32 MiB: %+v, %v", res, err)
	}
}

// The bomb is cheap to fetch, so the fetch's byte bound passes it; the
// bound on what writing it out costs is Expand's, on the blocks fetched.
func TestFetchWithinThenExpandRefusesTheBomb(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 64<<20)
	connect(t, b.h, a.h)
	bomb, err := datatest.RepeatedFolder(context.Background(), a.s.DAG(), 4, 2000, ChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.x.FetchWithin(fetchCtx(t, time.Minute), bomb, nil, FetchLimits{MaxBytes: 1 << 30}, nil)
	if err != nil || res.Blocks != 2 {
		t.Fatalf("fetch: %+v, %v; want its 2 blocks", res, err)
	}
	if claimed, _ := b.s.Size(context.Background(), bomb); claimed < 2000*ChunkSize {
		t.Fatalf("the bomb's root claims %d bytes", claimed)
	}
	if _, err := b.s.Expand(context.Background(), bomb, 256<<20); !errors.As(err, new(*SizeError)) {
		t.Fatalf("expand within 256 MiB: %v, want a SizeError", err)
	}
}

// A 3,000-deep folder costs a round trip per level to fetch, at kilobytes
// a second; a bounded fetch ends at level 65 with an error that says why.
func TestFetchWithinEndsADeepFolderQuickly(t *testing.T) {
	a := newXNode(t, testPrefix, 64<<20)
	b := newXNode(t, testPrefix, 64<<20)
	connect(t, b.h, a.h)
	deep, err := deepFolder(t, a.s, 3000)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	defer func() { t.Logf("the bounded fetch took %v", time.Since(began)) }()
	res, err := b.x.FetchWithin(fetchCtx(t, 2*time.Minute), deep, nil, FetchLimits{MaxBytes: 1 << 30}, nil)
	if !errors.Is(err, ErrTooDeep) || !strings.Contains(err.Error(), "folder deeper than 64 levels") {
		t.Fatalf("fetch: %v, want ErrTooDeep naming 64 levels", err)
	}
	if res.Blocks > MaxFolderDepth+2 {
		t.Errorf("%d blocks fetched, want the fetch stopped at level %d", res.Blocks, MaxFolderDepth+1)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	noPins(t, b.s)
}

// A fetch cut short by a restart leaves blocks in the store, which the
// next fetch counts as present: the bound holds across the restart,
// because it is measured on the DAG each time, not kept in memory.
func TestFetchWithinBoundHoldsAfterARestart(t *testing.T) {
	a := newXNode(t, testPrefix, 256<<20)
	b := newXNode(t, testPrefix, 256<<20)
	connect(t, b.h, a.h)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"big.bin": noise(22, 64*ChunkSize)})
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	// The first try, within a bound the DAG fits, is cut short halfway.
	ctx, cancel := context.WithCancel(context.Background())
	_, err = b.x.FetchWithin(ctx, root, nil, FetchLimits{MaxBytes: 12 << 20}, func(p FetchProgress) {
		if p.Bytes > 8<<20 {
			cancel()
		}
	})
	cancel()
	if err == nil {
		t.Fatal("the fetch cut short succeeded")
	}
	if used := b.s.Used(); used < 8<<20 {
		t.Fatalf("%d bytes stored before the restart", used)
	}
	b.restart(testPrefix, 256<<20)
	connect(t, b.h, a.h)
	// Again after the restart: the blocks already here count, so it
	// stops at the same bound, not 12 MiB later.
	_, err = b.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{MaxBytes: 12 << 20}, nil)
	if !errors.As(err, new(*SizeError)) {
		t.Fatalf("after the restart: %v, want a SizeError", err)
	}
	if used := b.s.Used(); used > 12<<20+putBatch*ChunkSize+64<<10 {
		t.Errorf("%d bytes stored, want no more than the bound and one write", used)
	}
	noPins(t, b.s)
}

// The bound is there for a DAG that was all here already, too.
func TestFetchWithinBoundsADAGAlreadyHere(t *testing.T) {
	b := newXNode(t, testPrefix, 64<<20)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"f.bin": noise(23, 8*ChunkSize)})
	root, err := b.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{MaxBytes: 1 << 20}, nil); !errors.As(err, new(*SizeError)) {
		t.Fatalf("fetch: %v, want a SizeError", err)
	}
	if _, err := b.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{}, nil); err == nil {
		t.Fatal("a fetch without a bound was taken")
	}
}

// A bounded fetch that finds the whole DAG over its bound already here
// (blocks kept, unpinned, from an earlier fetch) fails, and pins nothing:
// a pin would keep the blocks of a fetch its caller was told failed.
// The same check covers a fetch whose last batch crossed the bound.
func TestFetchWithinOverItsBoundPinsNothing(t *testing.T) {
	b := newXNode(t, testPrefix, 64<<20)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"f.bin": noise(24, 8*ChunkSize)})
	root, err := b.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.s.Unpin(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if _, err := b.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{MaxBytes: 1 << 20}, nil); !errors.As(err, new(*SizeError)) {
		t.Fatalf("fetch: %v, want a SizeError", err)
	}
	noPins(t, b.s)
	if _, err := b.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{MaxBytes: 16 << 20, MaxBlocks: 3}, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("fetch of a DAG of more than 3 blocks within 3: %v, want ErrTooLarge", err)
	}
	noPins(t, b.s)
	if _, err := b.x.FetchWithin(fetchCtx(t, time.Minute), root, nil, FetchLimits{MaxBytes: 16 << 20}, nil); err != nil {
		t.Fatalf("fetch within a bound it fits: %v", err)
	}
	if pins, err := b.s.Pins(context.Background()); err != nil || len(pins) != 1 {
		t.Fatalf("pins %v (%v), want the root", pins, err)
	}
}

// The second guard: the tar stream that fills a volume stops at the
// bound it was given (the measured size), counting the repeated leaf
// each time it is written.
func TestWriteTarOfTheBombStopsAtItsBound(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	bomb, err := datatest.RepeatedFolder(ctx, s.DAG(), 5, 2000, ChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	var w countWriter
	err = WriteTar(ctx, s.DAG(), bomb, &w, ExportLimits{MaxBytes: 50 << 20, MaxEntries: MaxEntries})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("WriteTar within 50 MiB: %v, want ErrTooLarge", err)
	}
	if w > 51<<20 {
		t.Errorf("%d bytes written, want the stream stopped at 50 MiB", int64(w))
	}
}
