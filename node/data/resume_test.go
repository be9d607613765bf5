package data

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
)

// countingBlockstore counts the blocks a peer reads to serve.
type countingBlockstore struct {
	blockstore.Blockstore
	gets *atomic.Int64
}

func (c countingBlockstore) Get(ctx context.Context, k cid.Cid) (blocks.Block, error) {
	c.gets.Add(1)
	return c.Blockstore.Get(ctx, k)
}

func countKeys(t *testing.T, s *Store) int {
	t.Helper()
	ch, err := s.Blockstore().AllKeysChan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range ch {
		n++
	}
	return n
}

// A fetch killed halfway resumes after a restart of the fetcher: the
// blocks it had are not asked for again, and the DAG ends up whole.
func TestExchangeFetchResumesAfterAKill(t *testing.T) {
	src := filepath.Join(t.TempDir(), "big")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	body := []byte(noise(9, 40*ChunkSize))
	if err := os.WriteFile(filepath.Join(src, "shard.bin"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	a := newXNode(t, testPrefix, 64<<20)
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	total := countKeys(t, a.s)
	var served atomic.Int64
	a.x.Close()
	a.s.bs = countingBlockstore{a.s.bs, &served}
	a.start(testPrefix)

	b := newXNode(t, testPrefix, 64<<20)
	connect(t, b.h, a.h)
	ctx, kill := context.WithCancel(context.Background())
	_, err = b.x.Fetch(ctx, root, func(p FetchProgress) {
		if p.Blocks >= total/3 {
			kill()
		}
	})
	kill()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("killed fetch: %v, want context.Canceled", err)
	}
	// The fetcher's daemon restarts: store and exchange closed and opened.
	b.stop()
	b.s = openStore(t, b.dir, 64<<20)
	b.start(testPrefix)
	have := countKeys(t, b.s)
	if have == 0 || have >= total {
		t.Fatalf("after the kill the fetcher holds %d of %d blocks; the test wants a partial fetch", have, total)
	}
	noPins(t, b.s)
	connect(t, b.h, a.h)
	served.Store(0)
	if _, err := b.x.Fetch(fetchCtx(t, 30*time.Second), root, nil); err != nil {
		t.Fatal(err)
	}
	if got := served.Load(); got == 0 || got > int64(total-have) {
		t.Errorf("the resumed fetch had the peer serve %d blocks; %d of %d were here already, so at most %d were wanted", got, have, total, total-have)
	}
	sameTree(t, b.s, root, src)
}
