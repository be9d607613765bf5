package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/repo"
)

// feedOf appends to a real ledger feed, as feeds.append does, slowly
// enough that a burst outruns the journal's queue.
func feedOf(t *testing.T, delay time.Duration) (*ledger.Store, actor, func(typ string, payload []byte) (string, error)) {
	t.Helper()
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := newActor(t)
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
	j := newJournal(appendFn, quietLog, 4, 5*time.Second)
	const n = 40
	for i := range n {
		if err := j.enqueue(ledger.TypeRating, []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := j.close(context.Background()); err != nil {
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
	if err := j.enqueue(ledger.TypeRating, []byte("late")); !errors.Is(err, errJournalClosed) {
		t.Fatalf("enqueue after close: %v", err)
	}
	if j.tryEnqueue(ledger.TypeRating, []byte("late")) {
		t.Fatal("tryEnqueue after close accepted an entry")
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
	j := newJournal(stuck, quietLog, 2, 50*time.Millisecond)
	// One entry in the drain's hands, two queued: the queue is full.
	for i := range 3 {
		if err := j.enqueue(ledger.TypeRating, []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if i == 0 {
			waitFor(t, time.Second, "the drain to take the first entry", func() bool { return len(j.q) == 0 })
		}
	}
	if j.tryEnqueue(ledger.TypeRating, []byte("try")) {
		t.Fatal("tryEnqueue took an entry into a full queue")
	}
	start := time.Now()
	if err := j.enqueue(ledger.TypeRating, []byte("x")); !errors.Is(err, errJournalFull) {
		t.Fatalf("enqueue into a stuck journal: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("enqueue held its caller %v", took)
	}
	close(gate)
	if err := j.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := payloadsOf(t, st, a.ID); fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("feed %v, want the three entries taken, in order", got)
	}
}

// Stop drains the journal into ledger.db before closing it: a burst
// larger than the queue, enqueued just before Stop, is all in the feed
// when the node starts again.
func TestStopDrainsTheJournal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startTestNode(t, ctx, "", Options{})
	self := n.Host().ID().String()
	before := uint64(0)
	if h, ok, err := n.ledger.Head(self); err != nil {
		t.Fatal(err)
	} else if ok {
		before = h.Seq
	}
	count := journalQueue + 50
	probe := func(i int) string {
		return fmt.Sprintf(`{"provider":"p","lease":"l","kind":"canary","result":"passed","got_sha256":"","detail":"%d"}`, i)
	}
	for i := range count {
		if err := n.journal.enqueue(ledger.TypeProbe, []byte(probe(i))); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := n.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	st, err := ledger.OpenStore(filepath.Join(n.Repo().Dir, repo.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	if err := st.Walk(self, before+1, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		got = append(got, string(e.Payload))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != count {
		t.Fatalf("%d of %d journaled entries in ledger.db after Stop", len(got), count)
	}
	for i, p := range got {
		if p != probe(i) {
			t.Fatalf("entry %d out of order: %s", i, p)
		}
	}
}
