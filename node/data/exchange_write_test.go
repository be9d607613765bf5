package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/data/datatest"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// TestFetchGathersBlocksBehindASlowDisk: while the store is writing, the
// blocks that arrive gather and go to the next write together, up to a
// batch, so a slow disk costs one filesystem sync per batch, not per
// block or two.
func TestFetchGathersBlocksBehindASlowDisk(t *testing.T) {
	a := newXNode(t, testPrefix, 256<<20)
	b := newXNode(t, testPrefix, 256<<20)
	// 128 leaves of 256 KiB under one root: four full batches.
	const leaves = 4 * putBatch
	src := filepath.Join(t.TempDir(), "big")
	data := make([]byte, leaves*ChunkSize)
	for i := range data {
		data[i] = byte(i*7 + i/ChunkSize)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var writes []int
	const total = leaves + 1
	// Each write waits until the fetch has handed its writer a full batch
	// beyond this write (or all that is left): blocks wait for the disk,
	// as on a slow one, on a machine of any speed. Nothing then decides
	// the next write's size but how the writer takes what waits.
	b.s.beforeWrite = func(n int) {
		mu.Lock()
		before := 0
		for _, w := range writes {
			before += w
		}
		writes = append(writes, n)
		mu.Unlock()
		want := int64(min(total-before-n, putBatch))
		for deadline := time.Now().Add(30 * time.Second); b.x.handed.Load()-int64(before+n) < want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("after %d blocks written, %d more were never handed over (%d were)", before+n, want, b.x.handed.Load())
				return
			}
		}
	}
	connect(t, b.h, a.h)
	res, err := b.x.Fetch(fetchCtx(t, time.Minute), root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != leaves+1 {
		t.Fatalf("fetched %d blocks, want %d", res.Blocks, leaves+1)
	}
	sameTree(t, b.s, root, src)
	mu.Lock()
	defer mu.Unlock()
	// The root's write, then full batches while blocks wait, then what
	// is left. Handed over as they came, a write took what had come
	// before the last one started: a block or two (writes were
	// [1 1 1 1 32 32 32 29]).
	if len(writes) < 4 {
		t.Fatalf("%d store writes for %d blocks: %v", len(writes), res.Blocks, writes)
	}
	for i, n := range writes[1 : len(writes)-1] {
		if n != putBatch {
			t.Fatalf("write %d took %d blocks, want a full batch (%d): %v", i+1, n, putBatch, writes)
		}
	}
	if last := writes[len(writes)-1]; last > putBatch {
		t.Fatalf("the last write took %d blocks, more than a batch: %v", last, writes)
	}
}

// TestFetchPausesOnBytesBehindASlowDisk: while the store cannot write,
// the fetch hands its writer no more than maxUnwritten bytes of blocks
// (one block past it at most), counted in bytes, not in blocks: a DAG of
// 2 MiB blocks, the largest there are, hands it no more bytes than one of
// chunks. Counted in blocks (3*putBatch), all 48 leaves here, 96 MiB,
// would be handed over.
func TestFetchPausesOnBytesBehindASlowDisk(t *testing.T) {
	a := newXNode(t, testPrefix, 256<<20)
	b := newXNode(t, testPrefix, 256<<20)
	const leaves = 48
	root, nodes := leafFolder(t, a, leaves)
	// The first write (the folder's block) waits until the fetch has
	// taken what it will: nothing more handed over for half a second.
	var once sync.Once
	var held int64
	b.s.beforeWrite = func(int) {
		once.Do(func() {
			last, since := b.x.handed.Load(), time.Now()
			for deadline := since.Add(30 * time.Second); time.Since(since) < 500*time.Millisecond; time.Sleep(10 * time.Millisecond) {
				if n := b.x.handed.Load(); n != last {
					last, since = n, time.Now()
				}
				if time.Now().After(deadline) {
					t.Errorf("the fetch kept taking blocks for 30 s behind a write that did not end (%d taken)", last)
					break
				}
			}
			held = last
		})
	}
	connect(t, b.h, a.h)
	res, err := b.x.Fetch(fetchCtx(t, time.Minute), root.Cid(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != leaves+1 {
		t.Fatalf("fetched %d blocks, want %d", res.Blocks, leaves+1)
	}
	// The folder's block, then leaves up to the bound and one past it.
	if limit := int64(1 + maxUnwritten/MaxBlockBytes + 1); held > limit || held < 2 {
		t.Fatalf("%d blocks taken behind the held write, want 2 to %d: %d MiB of 2 MiB blocks against a bound of %d MiB",
			held, limit, (held-1)*2, maxUnwritten>>20)
	}
	t.Logf("%d blocks taken behind the held write (bound %d MiB)", held, maxUnwritten>>20)
	for _, n := range nodes {
		if ok, err := b.s.Blockstore().Has(context.Background(), n.Cid()); err != nil || !ok {
			t.Fatalf("leaf %s not stored after the fetch: %v", n.Cid(), err)
		}
	}
}

// A take stops at the byte bound, not at a batch, when large blocks have
// queued up: 12 blocks of 2 MiB bring nothing waiting to 24 MiB
// (maxUnwritten). (On loopback the blocks come one at a time, so the
// fetch above cannot tell.) Chunks fill a batch; a want batch's end stops
// a take; nothing queued ends it.
func TestTakeStopsAtTheByteBound(t *testing.T) {
	queued := func(size int, n int, endAt int) (event, chan event) {
		ch := make(chan event, n)
		var first event
		for i := range n {
			ev := event{blk: blocks.NewBlock(bytes.Repeat([]byte{byte(i)}, size))}
			if i == endAt {
				ev = event{batch: []cid.Cid{cid.Cid{}}}
			}
			if i == 0 {
				first = ev
				continue
			}
			ch <- ev
		}
		return first, ch
	}
	for _, c := range []struct {
		name           string
		size, n, endAt int
		unwritten      int64
		want           int
		ended          bool
	}{
		{name: "2 MiB blocks, nothing waiting", size: MaxBlockBytes, n: putBatch, endAt: -1, want: maxUnwritten / MaxBlockBytes},
		{name: "2 MiB blocks, 20 MiB waiting", size: MaxBlockBytes, n: putBatch, endAt: -1, unwritten: 20 << 20, want: 2},
		{name: "2 MiB blocks, the bound reached", size: MaxBlockBytes, n: putBatch, endAt: -1, unwritten: maxUnwritten, want: 1},
		{name: "chunks fill a batch", size: ChunkSize, n: putBatch + 5, endAt: -1, want: putBatch},
		{name: "a want batch's end", size: ChunkSize, n: 10, endAt: 4, want: 4, ended: true},
		{name: "nothing more queued", size: ChunkSize, n: 3, endAt: -1, want: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, ch := queued(c.size, c.n, c.endAt)
			got, ended := take(first, ch, c.unwritten)
			if len(got) != c.want || (ended != nil) != c.ended {
				t.Fatalf("took %d blocks (ended %v), want %d (ended %v)", len(got), ended != nil, c.want, c.ended)
			}
		})
	}
}

// leafFolder stores on x a folder of n leaves of MaxBlockBytes each.
func leafFolder(t *testing.T, x *xnode, n int) (ipld.Node, []ipld.Node) {
	t.Helper()
	ctx := context.Background()
	names := make([]string, n)
	nodes := make([]ipld.Node, n)
	for i := range nodes {
		leaf, err := datatest.Leaf(ctx, x.s.DAG(), uint64(i+1), MaxBlockBytes)
		if err != nil {
			t.Fatal(err)
		}
		names[i], nodes[i] = fmt.Sprintf("f%02d", i), leaf
	}
	root, err := datatest.Folder(ctx, x.s.DAG(), names, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return root, nodes
}

// A walk paused for its writer waits on the disk, not on the network,
// so the stall check does not take the pause for unanswered wants: no
// bitswap restart, no wants sent again, however long the write takes.
// The fetch is one the stall check would act on: its blocks were wanted
// by a fetch that was cancelled moments before (withdraw.go), and the
// write it pauses behind takes longer than rewantStall.
func TestAFetchPausedForItsWriterIsNotAStall(t *testing.T) {
	a := newXNode(t, testPrefix, 256<<20)
	b := newXNode(t, testPrefix, 256<<20)
	root, _ := leafFolder(t, a, 48)
	var hold atomic.Bool
	var once sync.Once
	b.s.beforeWrite = func(int) {
		if hold.Load() {
			once.Do(func() { time.Sleep(rewantStall + rewantStall/2 + 500*time.Millisecond) })
		}
	}
	connect(t, b.h, a.h)
	ctx, cancel := context.WithCancel(fetchCtx(t, time.Minute))
	if _, err := b.x.Fetch(ctx, root.Cid(), func(FetchProgress) { cancel() }); !errors.Is(err, context.Canceled) {
		t.Fatalf("the first fetch, cancelled at its first write: %v", err)
	}
	hold.Store(true)
	start := time.Now()
	res, err := b.x.Fetch(fetchCtx(t, time.Minute), root.Cid(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != 49 {
		t.Fatalf("fetched %d blocks, want 49", res.Blocks)
	}
	if took := time.Since(start); took < rewantStall {
		t.Fatalf("the fetch took %v: the held write (longer than rewantStall, %v) did not hold it", took, rewantStall)
	}
	if n := b.x.rewants.Load(); n != 0 {
		t.Fatalf("the fetch sent its wants again %d times while it waited for its writer", n)
	}
}
