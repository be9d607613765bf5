package trust

import (
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// queue is a spawn that keeps what it is given until the test runs it.
type queue struct {
	mu   sync.Mutex
	fns  []func()
	stop bool
}

func (q *queue) spawn(f func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stop {
		return false
	}
	q.fns = append(q.fns, f)
	return true
}

func (q *queue) runAll() int {
	q.mu.Lock()
	fns := q.fns
	q.fns = nil
	q.mu.Unlock()
	for _, f := range fns {
		f()
	}
	return len(fns)
}

// TestBackgroundRefreshAnswersStaleReadsAtOnce: with RefreshInBackground,
// a read of a stale view answers from the latest pass without computing
// (the double lease added meanwhile does not convict yet), queues exactly
// one pass however many readers find it stale, and once that pass has run
// every read sees the conviction. A stopping node (spawn refuses) keeps
// answering from the latest pass and queues nothing.
func TestBackgroundRefreshAnswersStaleReadsAtOnce(t *testing.T) {
	w := newLedgerWorld(t)
	prov, r1, r2 := newActor(t), newActor(t), newActor(t)
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	w.lease(r1, prov, "job-1", auction.Silver, t0, time.Hour, "gpu-a")

	now := time.Now()
	var q queue
	v := NewView(w.St, r2.ID, nil, func() time.Time { return now })
	v.RefreshInBackground(q.spawn)
	if v.Convicted(prov.ID) {
		t.Fatal("one lease convicted its provider")
	}
	if n := q.runAll(); n != 0 {
		t.Fatalf("the first read queued %d passes; it computes inline", n)
	}
	// The provider sells gpu-a again over the first lease.
	w.lease(r2, prov, "job-2", auction.Gold, t0.Add(20*time.Minute), time.Hour, "gpu-a")
	if v.Convicted(prov.ID) {
		t.Fatal("a fresh view recomputed before it was stale")
	}
	now = now.Add(staleAfter)
	for range 5 {
		if v.Convicted(prov.ID) {
			t.Fatal("a stale read computed inline instead of answering from the latest pass")
		}
	}
	if n := q.runAll(); n != 1 {
		t.Fatalf("5 stale reads queued %d passes, want 1", n)
	}
	if !v.Convicted(prov.ID) {
		t.Fatal("after the background pass the double lease does not convict")
	}
	if sc := v.Score(prov.ID); sc != 0 {
		t.Fatalf("a convicted provider scores %v", sc)
	}
	// Stale again while the node stops: answers, queues nothing, and a
	// later spawn that works queues a pass again.
	now = now.Add(staleAfter)
	q.stop = true
	if !v.Convicted(prov.ID) {
		t.Fatal("a stopping node's view forgot its latest pass")
	}
	q.stop = false
	v.Convicted(prov.ID)
	if n := q.runAll(); n != 1 {
		t.Fatalf("after a refused spawn, a stale read queued %d passes, want 1", n)
	}
}
