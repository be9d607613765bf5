package providing

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/ledgertest"
)

// A provider journals its hardware claim once, and again only when the
// hardware changes; a restart with the same GPUs journals nothing new.
func TestHardwareClaimJournaledOnChangeOnly(t *testing.T) {
	ctx := t.Context()
	w := ledgertest.NewWorld(t)
	self := ledgertest.NewActor(t)
	var appendMu sync.Mutex // the real feed appends one at a time
	newClaimer := func() *Claimer {
		return &Claimer{Ledger: w.St, Self: self.ID, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Append: func(typ string, payload []byte) (string, error) {
				appendMu.Lock()
				defer appendMu.Unlock()
				w.Append(self, typ, payload, time.Now())
				return "", nil
			}}
	}
	claims := func() int {
		count := 0
		h, ok, _ := w.St.Head(self.ID)
		if ok {
			_ = w.St.Walk(self.ID, 1, h.Seq, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
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
	c := newClaimer()
	c.Start(ctx, src)
	inv, _ := src.Inventory(ctx)
	c.Observe(inv) // every monitor poll: nothing changed
	if got := claims(); got != 1 {
		t.Fatalf("%d claims after start and a poll, want 1", got)
	}
	newClaimer().Start(ctx, src) // a restart with the same GPUs
	if got := claims(); got != 1 {
		t.Fatalf("%d claims after a restart, want 1", got)
	}
	inv.GPUs = inv.GPUs[:1] // a GPU taken out
	c.MinGap = time.Hour
	c.Observe(inv)
	if got := claims(); got != 1 {
		t.Fatalf("%d claims after a change within the gap, want 1 (the change waits)", got)
	}
	c.MinGap = 0
	c.Observe(inv)
	if got := claims(); got != 2 {
		t.Fatalf("%d claims after the hardware changed, want 2", got)
	}
	c.Observe(attest.Inventory{}) // a failed poll is not GPUs gone
	if got := claims(); got != 2 {
		t.Fatalf("%d claims after a failed poll, want 2", got)
	}
	// Polls racing each other (the monitor's hook and start) journal a
	// change once: the append runs outside the lock, not twice.
	full, _ := src.Inventory(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Observe(full) }()
	}
	wg.Wait()
	if got := claims(); got != 3 {
		t.Fatalf("%d claims after 8 racing polls of one change, want 3", got)
	}
}
