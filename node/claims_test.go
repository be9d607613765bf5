package node

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	ma "github.com/multiformats/go-multiaddr"
)

// A provider journals its hardware claim once, and again only when the
// hardware changes; a restart with the same GPUs journals nothing new.
func TestHardwareClaimJournaledOnChangeOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, st, f := newLedgerNode(t, ctx)
	n := &Node{host: h, ledger: st, feeds: f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	claims := func() int {
		count := 0
		h, ok, _ := n.ledger.Head(n.host.ID().String())
		if ok {
			_ = n.ledger.Walk(n.host.ID().String(), 1, h.Seq, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
				if e.Type == ledger.TypeHardwareClaim {
					count++
				}
				return nil
			})
		}
		return count
	}
	src, err := attest.NewSimulatedSeed("2xRTX4090", "claims-test")
	if err != nil {
		t.Fatal(err)
	}
	c := &claimer{n: n}
	c.start(ctx, src)
	inv, _ := src.Inventory(ctx)
	c.observe(inv) // every monitor poll: nothing changed
	if got := claims(); got != 1 {
		t.Fatalf("%d claims after start and a poll, want 1", got)
	}
	(&claimer{n: n}).start(ctx, src) // a restart with the same GPUs
	if got := claims(); got != 1 {
		t.Fatalf("%d claims after a restart, want 1", got)
	}
	inv.GPUs = inv.GPUs[:1] // a GPU taken out
	c.minGap = time.Hour
	c.observe(inv)
	if got := claims(); got != 1 {
		t.Fatalf("%d claims after a change within the gap, want 1 (the change waits)", got)
	}
	c.minGap = 0
	c.observe(inv)
	if got := claims(); got != 2 {
		t.Fatalf("%d claims after the hardware changed, want 2", got)
	}
	c.observe(attest.Inventory{}) // a failed poll is not GPUs gone
	if got := claims(); got != 2 {
		t.Fatalf("%d claims after a failed poll, want 2", got)
	}
	// Polls racing each other (the monitor's hook and start) journal a
	// change once: the append runs outside the lock, not twice.
	full, _ := src.Inventory(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); c.observe(full) }()
	}
	wg.Wait()
	if got := claims(); got != 3 {
		t.Fatalf("%d claims after 8 racing polls of one change, want 3", got)
	}
}

// newLedgerNode is a host with a ledger store and its replication started:
// all of a node a hardware claim needs.
func newLedgerNode(t testing.TB, ctx context.Context) (*p2p.Host, *ledger.Store, *feeds) {
	t.Helper()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := p2p.New(ctx, p2p.Identity(key), p2p.Network("local"), p2p.DisableNATServices(),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DHTMode("server"), p2p.DiscoveryInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), repo.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFeeds(h, st, key, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return h, st, f
}
