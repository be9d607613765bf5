package auction

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

func TestQueryProperty(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var stats [2]int
	defer func() { t.Logf("rounds with no match: %d, with matches: %d", stats[0], stats[1]) }()
	for round := 0; round < 300; round++ {
		c := newClock()
		b := NewBook(1000, c.now)
		var offers []*Offer
		var providers []string
		for i := 0; i < 200; i++ {
			p := fakeID(uint64(round*1000 + i))
			o := randomOffer(r, p, t0.Unix())
			o.Booked = randomBookings(r, o)
			offers, providers = append(offers, o), append(providers, p)
			mustPut(t, b, o)
		}
		c.add(time.Duration(r.Intn(7)) * 10 * time.Minute) // some expire; steps keep boundaries exact
		now := c.now().Unix()
		var rq []refClause
		var text []string
		for i := r.Intn(6); i > 0; i-- {
			rc := genClause(r, providers)
			rq, text = append(rq, rc), append(text, rc.String())
		}
		q, err := ParseQuery(strings.Join(text, " "))
		if err != nil {
			t.Fatalf("generated query %q: %v", strings.Join(text, " "), err)
		}
		got, ex, err := b.Query(q, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		returned := map[string]bool{}
		for _, o := range got {
			returned[o.Provider] = true
		}
		removed := make([]int, len(rq))
		expired := 0
		for _, o := range offers {
			first := -1
			for i, rc := range rq {
				if !refHolds(o, rq, rc, now) {
					first = i
					break
				}
			}
			live := now < o.ExpiresAt
			switch {
			case !live:
				expired++
			case first >= 0:
				removed[first]++
			}
			if want := live && first < 0; returned[o.Provider] != want || q.Match(o, c.now()) != want {
				t.Fatalf("query %q, offer %+v: returned %v, want %v (first failing clause %d)", q, o, returned[o.Provider], want, first)
			}
		}
		sum := ex.Expired
		for i := range rq {
			if ex.Clauses[i].Removed != removed[i] {
				t.Fatalf("query %q: clause %d removed %d, reference %d", q, i, ex.Clauses[i].Removed, removed[i])
			}
			sum += removed[i]
		}
		if ex.Expired != expired || ex.Considered != len(offers) || sum != ex.Considered-ex.Matched || ex.Matched != len(got) {
			t.Fatalf("explain %+v, expired %d", ex, expired)
		}
		checkOrder(t, b, q, rq, r, now)
		stats[min(ex.Matched, 1)]++
	}
}

// checkOrder runs q with a random order and limit and checks the result is
// the reference-sorted prefix: present values first, ties by provider.
func checkOrder(t *testing.T, b *Book, q *Query, rq []refClause, r *rand.Rand, now int64) {
	t.Helper()
	var orderable []string
	for _, f := range QueryFields() {
		if f.Orderable {
			orderable = append(orderable, f.Name)
		}
	}
	field := orderable[r.Intn(len(orderable))]
	order, desc := field, r.Intn(2) == 0
	if desc {
		order = "-" + field
	}
	all, _, _ := b.Query(q, "", 0)
	limit := 1 + r.Intn(20)
	got, ex, err := b.Query(q, order, limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != min(len(all), limit) || ex.Matched != len(all) {
		t.Fatalf("limit %d: %d of %d returned, explain says %d matched", limit, len(got), len(all), ex.Matched)
	}
	before := func(a, c *Offer) bool { // a strictly before c
		va, oka := refValue(a, rq, field, now)
		vc, okc := refValue(c, rq, field, now)
		if oka != okc {
			return oka
		}
		if oka && va != vc {
			return (va < vc) != desc
		}
		return a.Provider < c.Provider
	}
	for i := 1; i < len(got); i++ {
		if !before(got[i-1], got[i]) {
			t.Fatalf("order %s: %s before %s", order, got[i-1].Provider, got[i].Provider)
		}
	}
	in := map[string]bool{}
	for _, o := range got {
		in[o.Provider] = true
	}
	for _, o := range all { // nothing left out sorts before the last returned
		if !in[o.Provider] && len(got) > 0 && before(o, got[len(got)-1]) {
			t.Fatalf("order %s: %s omitted but sorts before %s", order, o.Provider, got[len(got)-1].Provider)
		}
	}
}
