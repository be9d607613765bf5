package executor

import (
	"context"
	"io"
	"sync"
)

// DefaultLogBytes is how much of each job's output the provider retains.
const DefaultLogBytes = 1 << 20

// maxChunk bounds one Next, so that a subscriber that fell far behind does
// not receive the whole ring in one allocation.
const maxChunk = 64 << 10

// LogBuffer keeps the last N bytes a job wrote and lets any number of
// subscribers follow it.
//
// Writes never block and never allocate beyond the ring: the executor drains
// the container's output as fast as it comes, so a job never stalls on a
// slow reader, and a reader that falls more than N bytes behind loses the
// oldest bytes (and is told how many) instead of growing a queue. Each
// subscriber is only a read offset plus a one-slot wake-up channel.
type LogBuffer struct {
	mu     sync.Mutex // guards everything below
	ring   []byte     // fixed size; byte i of the stream lives at ring[i%len(ring)]
	total  int64      // bytes ever written
	closed bool
	subs   map[*Subscriber]struct{}
}

// NewLogBuffer returns a buffer retaining the last capacity bytes.
func NewLogBuffer(capacity int) *LogBuffer {
	if capacity <= 0 {
		capacity = DefaultLogBytes
	}
	return &LogBuffer{ring: make([]byte, capacity), subs: map[*Subscriber]struct{}{}}
}

// Write appends p, overwriting the oldest bytes when full. It fails only
// after Close.
func (b *LogBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	size := len(b.ring)
	if len(p) > size { // only the tail can survive anyway
		b.total += int64(len(p) - size)
		p = p[len(p)-size:]
	}
	pos := int(b.total % int64(size))
	k := copy(b.ring[pos:], p)
	copy(b.ring, p[k:])
	b.total += int64(len(p))
	for s := range b.subs {
		s.notify()
	}
	return n, nil
}

// Close marks the end of the output; subscribers get io.EOF once drained.
func (b *LogBuffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.notify()
	}
	return nil
}

// Bytes returns a copy of the retained tail.
func (b *LogBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, _, _ := b.readLocked(0, len(b.ring))
	return data
}

// Written is the number of bytes ever written, retained or not.
func (b *LogBuffer) Written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// readLocked copies up to max bytes starting at stream offset off; bytes
// already overwritten are skipped and counted.
func (b *LogBuffer) readLocked(off int64, max int) (data []byte, next, skipped int64) {
	size := int64(len(b.ring))
	if oldest := b.total - min(b.total, size); off < oldest {
		skipped, off = oldest-off, oldest
	}
	n := min(b.total-off, int64(max))
	data = make([]byte, n)
	pos := int(off % size)
	k := copy(data, b.ring[pos:])
	copy(data[k:], b.ring)
	return data, off + n, skipped
}

// Subscriber follows a LogBuffer from the oldest retained byte on.
type Subscriber struct {
	b       *LogBuffer
	wake    chan struct{} // one slot: a pending wake-up is enough
	off     int64         // guarded by b.mu
	skipped int64         // guarded by b.mu
}

// Subscribe starts following the buffer. Call Close when done.
func (b *LogBuffer) Subscribe() *Subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &Subscriber{b: b, wake: make(chan struct{}, 1)}
	s.off = b.total - min(b.total, int64(len(b.ring)))
	b.subs[s] = struct{}{}
	return s
}

func (s *Subscriber) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next blocks until there are new bytes and returns them, or returns
// io.EOF after the buffer is closed and drained, or ctx's error.
func (s *Subscriber) Next(ctx context.Context) ([]byte, error) {
	for {
		s.b.mu.Lock()
		data, next, skipped := s.b.readLocked(s.off, maxChunk)
		s.off, s.skipped = next, s.skipped+skipped
		closed := s.b.closed
		s.b.mu.Unlock()
		switch {
		case len(data) > 0:
			return data, nil
		case closed:
			return nil, io.EOF
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Skipped is how many bytes this subscriber lost by falling behind.
func (s *Subscriber) Skipped() int64 {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.skipped
}

// Close stops following.
func (s *Subscriber) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	delete(s.b.subs, s)
}
