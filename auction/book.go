package auction

import (
	"container/heap"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Book errors. Put returns them wrapped with detail.
var (
	// ErrStaleSeq: the book already holds this provider's offer (or its
	// withdrawal) with an equal or higher sequence number. Gossip delivers
	// duplicates and replays; the p2p validator should ignore, not penalise.
	ErrStaleSeq = errors.New("stale offer sequence")
	// ErrBookFull: the book is full and every offer in it expires no
	// sooner than the new one.
	ErrBookFull = errors.New("offer book full")
)

// Book holds the newest live offer of each provider: what a renter's
// auction filters. Offers are treated as immutable once Put: callers must
// not modify an offer after handing it over or after Get/Snapshot/Query.
//
// When full, Put evicts the offer that expires soonest, but only in favour
// of an offer that expires later than it: an offer about to lapse is the
// least useful to a renter and the cheapest to lose (its provider will
// re-announce), and the rule means a flood of short-lived offers cannot
// push out longer-lived ones.
type Book struct {
	max int
	now func() time.Time

	// mu guards everything below. Writers (Put, Remove, Expire) hold it
	// exclusively; Query holds it shared for the whole filter pass, which
	// avoids copying 100,000 pointers per query and lets queries run
	// together, at the price of a Put waiting for at most one query pass.
	mu      sync.RWMutex
	byProv  map[string]*entry
	list    []*entry          // every entry, in no order; entry.pos indexes it
	byExp   expHeap           // every entry, soonest expiry first
	withdrn tombstones        // providers that withdrew, with the seq of the withdrawal
	models  map[string]string // interned models and countries, see intern
}

type entry struct {
	// gpus holds f.groups for the usual offer of one or two models, so a
	// query reads one object per offer instead of chasing a pointer; the
	// hot facts follow it directly.
	gpus  [2]gpuGroup
	f     facts
	offer *Offer
	raw   []byte
	pos   int // in Book.list
	hpos  int // in Book.byExp
}

func newEntry(o *Offer, raw []byte) *entry {
	e := &entry{offer: o, raw: raw, f: factsOf(o)}
	if len(e.f.groups) <= len(e.gpus) {
		e.f.groups = e.gpus[:copy(e.gpus[:], e.f.groups)]
	}
	return e
}

// NewBook makes a book for at most maxOffers offers (and as many
// remembered withdrawals), reading time from now.
func NewBook(maxOffers int, now func() time.Time) *Book {
	if maxOffers < 1 {
		maxOffers = 1
	}
	return &Book{
		max:     maxOffers,
		now:     now,
		byProv:  make(map[string]*entry),
		withdrn: tombstones{m: make(map[string]tombstone)},
		models:  make(map[string]string),
	}
}

// Put stores o (with its wire bytes raw, kept so the node can re-serve the
// offer as received) if it is newer than what the book holds for its
// provider. o must already have passed DecodeSignedOffer or Validate; Put
// only checks what depends on the book's state and clock. A withdrawal
// removes the provider's offer and is remembered until every offer it could
// supersede has expired, so replaying an older offer cannot resurrect it.
func (b *Book) Put(o *Offer, raw []byte) (accepted bool, err error) {
	now := b.now().Unix()
	if now >= o.ExpiresAt {
		return false, fmt.Errorf("%w: provider %s seq %d", ErrOfferExpired, o.Provider, o.Seq)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.byProv[o.Provider]; ok && o.Seq <= cur.offer.Seq {
		return false, fmt.Errorf("%w: provider %s has seq %d, got %d", ErrStaleSeq, o.Provider, cur.offer.Seq, o.Seq)
	}
	if t, ok := b.withdrn.m[o.Provider]; ok && now < t.until {
		if o.Seq <= t.seq {
			return false, fmt.Errorf("%w: provider %s withdrew at seq %d, got %d", ErrStaleSeq, o.Provider, t.seq, o.Seq)
		}
	}
	if o.Withdrawn {
		b.remove(o.Provider)
		// An older offer was issued before the withdrawal, so it expires
		// within MaxOfferLifetime (plus skew) of the withdrawal's issue.
		until := o.IssuedAt + int64((MaxOfferLifetime+MaxClockSkew)/time.Second)
		b.withdrn.add(o.Provider, tombstone{seq: o.Seq, until: max(until, o.ExpiresAt)}, b.max, now)
		return true, nil
	}
	delete(b.withdrn.m, o.Provider)
	if cur, ok := b.byProv[o.Provider]; ok {
		b.drop(cur)
	} else if len(b.list) >= b.max {
		b.expireLocked(now)
		if len(b.list) >= b.max {
			victim := b.byExp[0]
			if o.ExpiresAt <= victim.offer.ExpiresAt {
				return false, fmt.Errorf("%w: %d offers, none expires before %d", ErrBookFull, len(b.list), o.ExpiresAt)
			}
			b.drop(victim)
		}
	}
	e := newEntry(o, raw)
	b.intern(&e.f)
	e.pos = len(b.list)
	b.list = append(b.list, e)
	b.byProv[o.Provider] = e
	heap.Push(&b.byExp, e)
	return true, nil
}

// intern makes offers of one model share one string, so that comparing a
// query's model against 100,000 offers reads the same, cached bytes. The
// table is bounded because providers choose model names.
func (b *Book) intern(f *facts) {
	one := func(s *string) {
		if m, ok := b.models[*s]; ok {
			*s = m
		} else if len(b.models) < 4096 {
			b.models[*s] = *s
		}
	}
	for i := range f.groups {
		one(&f.groups[i].model)
	}
	one(&f.country)
}

// Get returns the provider's offer and the bytes it arrived as.
func (b *Book) Get(provider string) (o *Offer, raw []byte, ok bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, ok := b.byProv[provider]
	if !ok {
		return nil, nil, false
	}
	return e.offer, e.raw, true
}

// Remove forgets the provider's offer (not a withdrawal: a newer offer is
// accepted afterwards, and so is a replay of the removed one).
func (b *Book) Remove(provider string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.remove(provider)
}

func (b *Book) remove(provider string) bool {
	e, ok := b.byProv[provider]
	if ok {
		b.drop(e)
	}
	return ok
}

// drop unlinks e from the map, the list (swap with the last) and the heap.
func (b *Book) drop(e *entry) {
	delete(b.byProv, e.offer.Provider)
	last := b.list[len(b.list)-1]
	b.list[e.pos], last.pos = last, e.pos
	b.list[len(b.list)-1] = nil
	b.list = b.list[:len(b.list)-1]
	heap.Remove(&b.byExp, e.hpos)
}

// Len is the number of offers held, expired ones included until Expire.
func (b *Book) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.list)
}

// Expire drops expired offers and lapsed withdrawals and returns how many
// offers it dropped. Queries skip expired offers anyway; Expire reclaims
// their memory, so the node calls it periodically.
func (b *Book) Expire() int {
	now := b.now().Unix()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.withdrn.prune(now)
	return b.expireLocked(now)
}

func (b *Book) expireLocked(now int64) int {
	n := 0
	for len(b.byExp) > 0 && now >= b.byExp[0].offer.ExpiresAt {
		b.drop(b.byExp[0])
		n++
	}
	return n
}

// Snapshot returns every offer held, in no particular order.
func (b *Book) Snapshot() []*Offer {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*Offer, len(b.list))
	for i, e := range b.list {
		out[i] = e.offer
	}
	return out
}

// expHeap orders entries by expiry, soonest first, for Expire and eviction.
type expHeap []*entry

func (h expHeap) Len() int           { return len(h) }
func (h expHeap) Less(i, j int) bool { return h[i].offer.ExpiresAt < h[j].offer.ExpiresAt }
func (h expHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].hpos = i; h[j].hpos = j }
func (h *expHeap) Push(x any)        { e := x.(*entry); e.hpos = len(*h); *h = append(*h, e) }
func (h *expHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

type tombstone struct {
	seq   uint64
	until int64 // unix seconds
}

// tombstones remembers withdrawals, bounded like the book: when full, the
// one that lapses soonest goes (a linear scan, only when full).
type tombstones struct{ m map[string]tombstone }

func (t *tombstones) add(p string, ts tombstone, limit int, now int64) {
	if _, ok := t.m[p]; !ok && len(t.m) >= limit {
		t.prune(now)
		if len(t.m) >= limit {
			var victim string
			for k, v := range t.m {
				if victim == "" || v.until < t.m[victim].until {
					victim = k
				}
			}
			delete(t.m, victim)
		}
	}
	t.m[p] = ts
}

func (t *tombstones) prune(now int64) {
	for k, v := range t.m {
		if now >= v.until {
			delete(t.m, k)
		}
	}
}
