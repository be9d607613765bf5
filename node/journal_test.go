package node

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/journal"
	"github.com/gleaner-net/gleaner/node/repo"
)

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
	count := journal.DefaultQueue + 50
	probe := func(i int) string {
		return fmt.Sprintf(`{"provider":"p","lease":"l","kind":"canary","result":"passed","got_sha256":"","detail":"%d"}`, i)
	}
	for i := range count {
		if err := n.journal.Enqueue(ledger.TypeProbe, []byte(probe(i))); err != nil {
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
