package auction

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"
)

// clock is an injected, settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time            { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration)       { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *clock                     { return &clock{t: t0} }
func seqOffer(p string, seq uint64) *Offer { o := validOffer(p, t0); o.Seq = seq; return o }

func mustPut(t *testing.T, b *Book, o *Offer) {
	t.Helper()
	if ok, err := b.Put(o, nil); !ok || err != nil {
		t.Fatalf("put %s seq %d: %v %v", o.Provider, o.Seq, ok, err)
	}
}

func TestBookSeq(t *testing.T) {
	b := NewBook(10, newClock().now)
	p := fakeID(1)
	mustPut(t, b, seqOffer(p, 5))
	for _, seq := range []uint64{4, 5} {
		if ok, err := b.Put(seqOffer(p, seq), nil); ok || !errors.Is(err, ErrStaleSeq) {
			t.Fatalf("seq %d over 5: %v %v", seq, ok, err)
		}
	}
	mustPut(t, b, seqOffer(p, 6))
	if o, _, ok := b.Get(p); !ok || o.Seq != 6 || b.Len() != 1 {
		t.Fatalf("got %v %v, len %d", o, ok, b.Len())
	}
}

func TestBookWithdrawal(t *testing.T) {
	c := newClock()
	b := NewBook(10, c.now)
	p, q := fakeID(1), fakeID(2)
	mustPut(t, b, seqOffer(p, 5))
	w := seqOffer(p, 6)
	w.Withdrawn = true
	mustPut(t, b, w)
	if _, _, ok := b.Get(p); ok || b.Len() != 0 {
		t.Fatal("withdrawal did not remove the offer")
	}
	// A replay of the withdrawn offer, or of anything older, stays dead.
	for _, seq := range []uint64{5, 6} {
		if ok, err := b.Put(seqOffer(p, seq), nil); ok || !errors.Is(err, ErrStaleSeq) {
			t.Fatalf("replayed seq %d resurrected: %v", seq, err)
		}
	}
	// So does a withdrawal that arrives before the offer it withdraws.
	wq := seqOffer(q, 3)
	wq.Withdrawn = true
	mustPut(t, b, wq)
	if ok, _ := b.Put(seqOffer(q, 2), nil); ok {
		t.Fatal("offer older than a seen withdrawal accepted")
	}
	b.Expire() // tombstones outlive the offers they supersede
	if ok, _ := b.Put(seqOffer(q, 2), nil); ok {
		t.Fatal("Expire dropped a live tombstone")
	}
	mustPut(t, b, seqOffer(p, 7)) // the provider comes back
	// Remove is not a withdrawal: the same offer may come back.
	b.Remove(p)
	mustPut(t, b, seqOffer(p, 7))
}

func TestBookExpiry(t *testing.T) {
	c := newClock()
	b := NewBook(10, c.now)
	for i := 0; i < 4; i++ {
		o := seqOffer(fakeID(uint64(i)), 1)
		o.ExpiresAt = t0.Unix() + int64(i+1)*600
		mustPut(t, b, o)
	}
	late := seqOffer(fakeID(9), 1)
	late.ExpiresAt = t0.Unix()
	if ok, err := b.Put(late, nil); ok || !errors.Is(err, ErrOfferExpired) {
		t.Fatalf("expired offer: %v", err)
	}
	c.add(20 * time.Minute) // the first two have expired
	q, _ := ParseQuery("")
	got, ex, _ := b.Query(q, "", 0)
	if len(got) != 2 || ex.Expired != 2 || ex.Considered != 4 {
		t.Fatalf("query saw %d, explain %+v", len(got), ex)
	}
	if n := b.Expire(); n != 2 || b.Len() != 2 {
		t.Fatalf("expired %d, left %d", n, b.Len())
	}
}

func TestBookBounded(t *testing.T) {
	c := newClock()
	b := NewBook(3, c.now)
	exp := func(p string, min int64) *Offer {
		o := seqOffer(p, 1)
		o.ExpiresAt = t0.Unix() + min*60
		return o
	}
	for i, m := range []int64{30, 10, 20} {
		mustPut(t, b, exp(fakeID(uint64(i)), m))
	}
	if ok, err := b.Put(exp(fakeID(7), 10), nil); ok || !errors.Is(err, ErrBookFull) {
		t.Fatalf("evicted in favour of an offer expiring no later: %v", err)
	}
	mustPut(t, b, exp(fakeID(7), 40)) // evicts the 10-minute offer
	if _, _, ok := b.Get(fakeID(1)); ok || b.Len() != 3 {
		t.Fatal("wrong victim")
	}
	upd := exp(fakeID(2), 5) // an update never evicts, even when full
	upd.Seq = 2
	mustPut(t, b, upd)
	c.add(6 * time.Minute) // fakeID(2) expired: room without evicting a live offer
	mustPut(t, b, exp(fakeID(8), 7))
	if b.Len() != 3 {
		t.Fatalf("len %d", b.Len())
	}
	for _, p := range []string{fakeID(0), fakeID(7), fakeID(8)} {
		if _, _, ok := b.Get(p); !ok {
			t.Fatalf("%s missing", p)
		}
	}
}

// Concurrent puts, queries and expiry, for the race detector.
func TestBookConcurrent(t *testing.T) {
	c := newClock()
	b := NewBook(200, c.now)
	q, _ := ParseQuery("vram>=40 region=eu")
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 300; i++ {
				o := randomOffer(r, fakeID(uint64(r.Intn(300))), t0.Unix())
				b.Put(o, nil)
				if _, _, err := b.Query(q, "-vram", 10); err != nil {
					panic(fmt.Sprint(err))
				}
				if i%50 == 0 {
					b.Expire()
					b.Snapshot()
				}
			}
		}(g)
	}
	wg.Wait()
	if b.Len() > 200 {
		t.Fatalf("book grew to %d", b.Len())
	}
}
