package data

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
)

// servingBlockstore records the blocks a peer reads to serve.
type servingBlockstore struct {
	blockstore.Blockstore
	mu     *sync.Mutex
	served map[string]bool
}

func (s servingBlockstore) Get(ctx context.Context, k cid.Cid) (blocks.Block, error) {
	s.mu.Lock()
	s.served[k.KeyString()] = true
	s.mu.Unlock()
	return s.Blockstore.Get(ctx, k)
}

// take returns what was served since the last take, and forgets it.
func (s servingBlockstore) take() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := maps.Clone(s.served)
	clear(s.served)
	return got
}

// keySet is the set of blocks in s, by key.
func keySet(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	ch, err := s.Blockstore().AllKeysChan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for c := range ch {
		keys[c.KeyString()] = true
	}
	return keys
}

// A fetch killed halfway resumes after a restart of the fetcher: the
// blocks it had are not asked for again, and the DAG ends up whole.
func TestExchangeFetchResumesAfterAKill(t *testing.T) {
	src := filepath.Join(t.TempDir(), "big")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	// 100 leaves: more than three store batches (putBatch), so the batch
	// that crosses a third can never be the last one.
	body := []byte(noise(9, 100*ChunkSize))
	if err := os.WriteFile(filepath.Join(src, "shard.bin"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	a := newXNode(t, testPrefix, 64<<20)
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	total := len(keySet(t, a.s))
	a.x.Close()
	serving := servingBlockstore{a.s.bs, &sync.Mutex{}, map[string]bool{}}
	a.s.bs = serving
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
	// The fetcher's daemon restarts.
	b.restart(testPrefix, 64<<20)
	held := keySet(t, b.s)
	have := len(held)
	if have == 0 || have >= total {
		t.Fatalf("after the kill the fetcher holds %d of %d blocks; the test wants a partial fetch", have, total)
	}
	noPins(t, b.s)
	connect(t, b.h, a.h)
	serving.take() // what the killed fetch had asked for
	if _, err := b.x.Fetch(fetchCtx(t, 30*time.Second), root, nil); err != nil {
		t.Fatal(err)
	}
	// Count the blocks served once this fetch began. A want of the killed
	// fetch that the peer was still serving as the fetcher died may land
	// here too, so the check is on which blocks, not how many: none that
	// the fetcher held may be asked for again.
	served := serving.take()
	if len(served) == 0 {
		t.Fatal("the resumed fetch had the peer serve nothing")
	}
	for k := range served {
		if held[k] {
			c, _ := cid.Cast([]byte(k))
			t.Errorf("the resumed fetch asked again for %s, which the fetcher held", c)
		}
	}
	sameTree(t, b.s, root, src)
}
