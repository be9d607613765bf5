package data

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// refetchBound is how long one fetch of the test's DAG may take: far
// more than it takes (well under a second on loopback), far less than
// bitswap's rebroadcast of a want it deems sent (30 s), the wait a
// stalled fetch would otherwise end at.
const refetchBound = 10 * time.Second

// slowTagsHost is a host whose connection manager takes untagDelay to
// untag a peer, as a busy node's may: bitswap untags a session's peers
// as the session ends, so a cancelled fetch's session takes that long
// to withdraw its wants. It makes the window in which a fetch that
// follows a cancelled one can stall (issue 34) milliseconds wide rather
// than microseconds, so that a test of a few dozen fetches meets it.
type slowTagsHost struct{ host.Host }

const untagDelay = 20 * time.Millisecond

func (h slowTagsHost) ConnManager() connmgr.ConnManager {
	return slowUntag{h.Host.ConnManager()}
}

type slowUntag struct{ connmgr.ConnManager }

func (c slowUntag) UntagPeer(p peer.ID, tag string) {
	time.Sleep(untagDelay)
	c.ConnManager.UntagPeer(p, tag)
}

// newSlowTagsNode is newXNode whose exchange runs on a slowTagsHost.
func newSlowTagsNode(t *testing.T) *xnode {
	t.Helper()
	n := newXNode(t, testPrefix, 64<<20)
	n.x.Close()
	x, err := NewExchange(context.Background(), ExchangeConfig{
		Host:           slowTagsHost{n.h},
		ProtocolPrefix: testPrefix,
		Store:          n.s,
		Log:            slog.New(slog.NewTextHandler(n.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.x = x
	return n
}

// TestExchangeRefetchAfterACancel (issue 34): a fetch cancelled midway,
// fetched again at once over the same connection, gets the rest. Each
// round is a fresh fetcher whose fetch is cancelled as soon as it has
// written a batch, then fetched again at once, cuts times, and then
// fetched whole; a fetch that reaches refetchBound instead stalled.
// Before the fix (withdraw.go) most rounds stalled.
func TestExchangeRefetchAfterACancel(t *testing.T) {
	const rounds = 30
	const cuts = 4 // cancelled fetches a round
	src := filepath.Join(t.TempDir(), "in")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "shard.bin"), []byte(noise(31, 24*ChunkSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newXNode(t, testPrefix, 64<<20)
	root, err := a.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	stalled, fetches := 0, 0
	var restarts, rewants int64
	for i := range rounds {
		b := newSlowTagsNode(t)
		connect(t, b.h, a.h)
		for try := 0; ; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), refetchBound)
			_, err := b.x.Fetch(ctx, root, func(FetchProgress) {
				if try < cuts {
					cancel()
				}
			})
			cancel()
			fetches++
			if err == nil {
				sameTree(t, b.s, root, src)
				break
			}
			if errors.Is(err, context.Canceled) {
				continue
			}
			stalled++
			t.Errorf("round %d, fetch %d: %v", i, try, err)
			break
		}
		restarts += b.x.restarts.Load()
		rewants += b.x.rewants.Load()
		b.stop()
		b.h.Close()
	}
	if stalled > 0 {
		t.Errorf("%d of %d fetches stalled", stalled, fetches)
	}
	t.Logf("%d fetches in %d rounds; %d restarted bitswap with their sources, %d re-wanted after a stall", fetches, rounds, restarts, rewants)
}
