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
