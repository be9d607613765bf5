package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/repo"
)

// A node whose ledger.db was moved aside (what the damaged-file advice
// says to do) starts on an empty ledger, recovers its own feed from the
// peer that replicated it, and only then appends: an entry journaled
// before the peer even connects waits in the journal's queue and lands at
// seq n+1 on the old head, the peer takes it, and nobody holds a proof
// against this honest node. Without the recovery it would be a second
// seq 1: a fork.
func TestMovedAsideLedgerRecoversOwnFeedFromPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := startTestNode(t, ctx, "", Options{}), startTestNode(t, ctx, "", Options{})
	if err := a.Host().LibP2P().Connect(ctx, addrInfo(b.Host())); err != nil {
		t.Fatal(err)
	}
	self := a.Host().ID().String()
	const n = 20
	for range n {
		if err := a.journal.Enqueue(ledger.TypeVoucher, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	head := func(st *ledger.Store) ledger.Head { h, _, _ := st.Head(self); return h }
	waitFor(t, 30*time.Second, "the peer holds A's feed", func() bool { return head(b.ledger).Seq == n })
	old := head(a.ledger)

	a = restartNodeAfter(t, ctx, a, func() {
		p := filepath.Join(a.repo.Dir, repo.LedgerFile)
		if err := os.Rename(p, p+".damaged"); err != nil {
			t.Fatal(err)
		}
	})
	if err := a.journal.Enqueue(ledger.TypeVoucher, []byte(`{"after":true}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if h := head(a.ledger); h.Seq != 0 {
		t.Fatalf("A appended at seq %d before any peer answered", h.Seq)
	}
	if err := a.Host().LibP2P().Connect(ctx, addrInfo(b.Host())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 40*time.Second, "A's queued entry appended", func() bool { return head(a.ledger).Seq == n+1 })
	e, _, err := a.ledger.Get(head(a.ledger).CID)
	if err != nil || e.Prev != old.CID.String() {
		t.Fatalf("A's next entry prev = %v (%v), want the old head %s", e, err, old.CID)
	}
	waitFor(t, 30*time.Second, "the peer takes A's next entry", func() bool { return head(b.ledger).Seq == n+1 })
	for _, st := range []*ledger.Store{a.ledger, b.ledger} {
		if _, frozen := st.Frozen(self); frozen {
			t.Fatal("a proof of equivocation against the honest node A")
		}
	}
}
