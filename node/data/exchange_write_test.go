package data

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
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
	// Every write after the root's waits until bitswap has received every
	// block, and then a while longer for them to reach the fetch: blocks
	// wait for the disk, as on a slow one, on a machine of any speed.
	b.s.beforeWrite = func(n int) {
		mu.Lock()
		writes = append(writes, n)
		first := len(writes) == 1
		mu.Unlock()
		if first {
			return
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if st, err := b.x.bs.Stat(); err == nil && st.BlocksReceived >= leaves+1 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
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
	// The root's write, then the first leaves, taken while the writer
	// was free; from then on the writer is always busy when blocks come,
	// so every write but the last takes a full batch. Handed over as
	// they came, a write took what had come before the last one started:
	// a block or two.
	if len(writes) < 4 {
		t.Fatalf("%d store writes for %d blocks: %v", len(writes), res.Blocks, writes)
	}
	for i, n := range writes[2 : len(writes)-1] {
		if n != putBatch {
			t.Fatalf("write %d took %d blocks, want a full batch (%d): %v", i+2, n, putBatch, writes)
		}
	}
	if last := writes[len(writes)-1]; last > putBatch {
		t.Fatalf("the last write took %d blocks, more than a batch: %v", last, writes)
	}
}
