package console

import (
	"sync"
	"time"
)

// The console keeps what the node does not keep over time (the GPUs',
// the services' and the market's figures) in memory, in fixed rings:
// nothing is stored, and a restart starts the charts afresh.

// ring is a bounded buffer of samples, oldest overwritten first.
type ring[T any] struct {
	buf  []T
	next int // where the next sample goes
	full bool
}

func newRing[T any](n int) *ring[T] { return &ring[T]{buf: make([]T, n)} }

func (r *ring[T]) add(s T) {
	r.buf[r.next] = s
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

func (r *ring[T]) last() (T, bool) {
	if !r.full && r.next == 0 {
		var zero T
		return zero, false
	}
	return r.buf[(r.next+len(r.buf)-1)%len(r.buf)], true
}

// samples returns the ring's samples, oldest first, as a copy.
func (r *ring[T]) samples() []T {
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// timed is a sample that knows when it was taken.
type timed interface{ taken() time.Time }

// keyedRings keeps a ring of samples per key (a GPU, a service, a model
// and tier). At most maxKeys keys get one, so that a node reporting
// without bound does not grow the console's memory; a sample closer than
// gap to its key's last is dropped, so that a page's own reading between
// two ticks keeps the period even. mu guards rings.
type keyedRings[K comparable, T timed] struct {
	mu      sync.Mutex
	size    int
	maxKeys int
	gap     time.Duration
	rings   map[K]*ring[T]
}

func newKeyedRings[K comparable, T timed](size, maxKeys int, gap time.Duration) *keyedRings[K, T] {
	return &keyedRings[K, T]{size: size, maxKeys: maxKeys, gap: gap, rings: map[K]*ring[T]{}}
}

func (kr *keyedRings[K, T]) add(k K, s T) {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	r := kr.rings[k]
	if r == nil {
		if len(kr.rings) >= kr.maxKeys {
			return
		}
		r = newRing[T](kr.size)
		kr.rings[k] = r
	}
	if last, ok := r.last(); ok && s.taken().Sub(last.taken()) < kr.gap {
		return
	}
	r.add(s)
}

// samples is k's samples, oldest first, as a copy (nil: none).
func (kr *keyedRings[K, T]) samples(k K) []T {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if r := kr.rings[k]; r != nil {
		return r.samples()
	}
	return nil
}

// dropUnless drops the ring of every key for which keep, given the key
// and its last sample, is false.
func (kr *keyedRings[K, T]) dropUnless(keep func(k K, last T) bool) {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	for k, r := range kr.rings {
		if l, _ := r.last(); !keep(k, l) {
			delete(kr.rings, k)
		}
	}
}

// keys is how many keys have a ring.
func (kr *keyedRings[K, T]) keys() int {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	return len(kr.rings)
}
