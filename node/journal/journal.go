// Package journal is the one ordered queue of the records this node appends to
// its own feed without waiting for them: as a renter, its leases,
// outcomes, telemetry digests and probes, and the fraud proofs it has
// standing to journal. One goroutine appends them in the order they were
// enqueued, so a run's outcome never reaches the feed before its lease,
// and no caller (a job runner, a reputation pass) does ledger I/O or
// spawns a goroutine to have it done.
//
// At start, while the node recovers its own feed from peers (a repo whose
// ledger.db was moved aside: node/replicate/recover.go), the drain's
// append waits, bounded, and entries queue here meanwhile (DefaultQueue;
// past it Enqueue gives up after DefaultWait): appending before the
// recovery would begin the feed again at sequence 1 and fork it.
//
// The provider's leases and settlements do not pass through it: a lease
// must be durable before the renter hears of it, and a settlement before
// the lease's GPUs are free (node/fraud.go reads that order), so the
// provider appends those itself, synchronously (node/feeds.go: feeds.record).
package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Journal is that queue: New starts its drain, Close ends it.
type Journal struct {
	append func(typ string, payload []byte) (string, error) // feeds.append
	log    *slog.Logger
	wait   time.Duration // how long Enqueue waits for room in a full queue

	mu     sync.RWMutex // guards closed; held for reading while sending on q, so close never closes q under a sender
	closed bool
	q      chan entry
	done   chan struct{} // closed once the drain has appended everything queued
}

type entry struct {
	typ     string
	payload []byte
}

const (
	// DefaultQueue bounds what waits to be appended: an entry is at most
	// ledger.MaxEntryBytes, so at most 16 MiB, usually a few hundred KiB.
	DefaultQueue = 256
	// DefaultWait is how long Enqueue blocks on a full queue: appends
	// take milliseconds, so a queue full for this long means the ledger
	// is stuck, and the caller is told rather than held.
	DefaultWait = 2 * time.Second
)

var (
	// ErrFull: the queue stayed full for the journal's wait.
	ErrFull = errors.New("the journal stayed full")
	// ErrClosed: the journal is closed; nothing more is appended.
	ErrClosed = errors.New("the journal is closed: the node is stopping")
)

// New starts the drain; Close ends it.
func New(appendFn func(typ string, payload []byte) (string, error), log *slog.Logger, size int, wait time.Duration) *Journal {
	j := &Journal{append: appendFn, log: log, wait: wait, q: make(chan entry, size), done: make(chan struct{})}
	go j.drain()
	return j
}

func (j *Journal) drain() {
	defer close(j.done)
	for e := range j.q {
		if _, err := j.append(e.typ, e.payload); err != nil {
			j.log.Warn("ledger entry not recorded", "type", e.typ, "err", err)
		}
	}
}

// Enqueue queues an entry behind every entry enqueued before it. When the
// queue is full it waits up to j.wait for room, then gives up, logs and
// says so. A nil journal journals nothing.
func (j *Journal) Enqueue(typ string, payload []byte) error {
	if j == nil {
		return nil
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		j.log.Warn("ledger entry not recorded", "type", typ, "err", ErrClosed)
		return ErrClosed
	}
	e := entry{typ, payload}
	select {
	case j.q <- e:
		return nil
	default:
	}
	t := time.NewTimer(j.wait)
	defer t.Stop()
	select {
	case j.q <- e:
		return nil
	case <-t.C:
		j.log.Warn("ledger entry not recorded", "type", typ, "err", ErrFull, "queued", cap(j.q))
		return ErrFull
	}
}

// TryEnqueue queues an entry only if there is room now: for callers that
// hold a lock and would rather offer the entry again later.
func (j *Journal) TryEnqueue(typ string, payload []byte) bool {
	if j == nil {
		return false
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return false
	}
	select {
	case j.q <- entry{typ, payload}:
		return true
	default:
		return false
	}
}

// Close refuses further entries and waits, until ctx ends, for the queued
// ones to be appended. Call it once every producer has stopped, and
// before the ledger closes.
func (j *Journal) Close(ctx context.Context) error {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.q)
	}
	j.mu.Unlock()
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("journal: %d entries not appended before the stop deadline: %w", len(j.q), ctx.Err())
	}
}
