package node

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
)

// A provider journals its hardware claim once, and again only when the
// hardware changes; a restart with the same GPUs journals nothing new.
func TestHardwareClaimJournaledOnChangeOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nd := newFeedNodeTB(t, ctx)
	n := &Node{host: nd.h, ledger: nd.f.store, feeds: nd.f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
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
}
