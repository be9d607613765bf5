package journal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"io"
	"log/slog"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/ledgertest"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// feedOf appends to a real ledger feed, as feeds.append does, slowly
// enough that a burst outruns the journal's queue.
func feedOf(t *testing.T, delay time.Duration) (*ledger.Store, ledgertest.Actor, func(typ string, payload []byte) (string, error)) {
	t.Helper()
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := ledgertest.NewActor(t)
	var mu sync.Mutex
	var head *ledger.Entry
	return st, a, func(typ string, payload []byte) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(delay)
		e, se, err := ledger.NewEntry(a.Key, head, typ, payload, time.Now())
		if err != nil {
			return "", err
		}
		if err := st.Append(se); err != nil {
			return "", err
		}
		head = e
		return se.CID().String(), nil
	}
}

// payloadsOf reads author's feed from seq 1, in feed order.
func payloadsOf(t *testing.T, st *ledger.Store, author string) []string {
	t.Helper()
	var out []string
	if err := st.Walk(author, 1, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		out = append(out, string(e.Payload))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Entries land in the feed in the order they were enqueued, and a burst
// ten times the queue's size loses none: enqueue waits for room instead.
func TestJournalKeepsOrderThroughABurst(t *testing.T) {
	st, a, appendFn := feedOf(t, time.Millisecond)
	j := New(appendFn, quietLog, 4, 5*time.Second)
	const n = 40
	for i := range n {
		if err := j.Enqueue(ledger.TypeRating, []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := j.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := payloadsOf(t, st, a.ID)
	if len(got) != n {
		t.Fatalf("%d of %d entries in the feed", len(got), n)
	}
	for i, p := range got {
		if p != strconv.Itoa(i) {
			t.Fatalf("feed entry %d is %s: out of order %v", i+1, p, got)
		}
	}
	if err := j.Enqueue(ledger.TypeRating, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enqueue after close: %v", err)
	}
	if j.TryEnqueue(ledger.TypeRating, []byte("late")) {
		t.Fatal("TryEnqueue after close accepted an entry")
	}
}

// A journal whose ledger is stuck holds a caller at most its wait, then
// says the entry was not taken; what it did take is appended once the
// ledger moves again.
func TestJournalFullReportsInsteadOfBlocking(t *testing.T) {
	st, a, appendFn := feedOf(t, 0)
	gate := make(chan struct{})
	stuck := func(typ string, payload []byte) (string, error) {
		<-gate
		return appendFn(typ, payload)
	}
	j := New(stuck, quietLog, 2, 50*time.Millisecond)
	// One entry in the drain's hands, two queued: the queue is full.
	for i := range 3 {
		if err := j.Enqueue(ledger.TypeRating, []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if i == 0 {
			for deadline := time.Now().Add(time.Second); len(j.q) != 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the drain did not take the first entry")
				}
			}
		}
	}
	if j.TryEnqueue(ledger.TypeRating, []byte("try")) {
		t.Fatal("tryEnqueue took an entry into a full queue")
	}
	start := time.Now()
	if err := j.Enqueue(ledger.TypeRating, []byte("x")); !errors.Is(err, ErrFull) {
		t.Fatalf("Enqueue into a stuck journal: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Enqueue held its caller %v", took)
	}
	close(gate)
	if err := j.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := payloadsOf(t, st, a.ID); fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("feed %v, want the three entries taken, in order", got)
	}
}
