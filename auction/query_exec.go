package auction

import (
	"fmt"
	"sort"
	"strings"
)

// Explain says why a query matched what it did: how many offers were
// considered, how many were expired, how many each clause removed (each
// rejected offer is charged to the first clause, in query order, that it
// fails), and how many matched before the limit.
// Considered = Expired + sum(Clauses[i].Removed) + Matched.
type Explain struct {
	Considered int          `json:"considered"`
	Expired    int          `json:"expired"`
	Clauses    []ClauseStat `json:"clauses"`
	Matched    int          `json:"matched"`
}

// ClauseStat is one clause, in canonical form, and the offers it removed.
type ClauseStat struct {
	Clause  string `json:"clause"`
	Removed int    `json:"removed"`
}

// String renders Explain for a terminal.
func (e *Explain) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d offers considered\n", e.Considered)
	if e.Expired > 0 {
		fmt.Fprintf(&b, "  %8d expired\n", e.Expired)
	}
	for _, c := range e.Clauses {
		fmt.Fprintf(&b, "  %8d removed by %s\n", c.Removed, c.Clause)
	}
	fmt.Fprintf(&b, "%d matched\n", e.Matched)
	return b.String()
}

// iterator yields candidate entries; nil when exhausted. Each stage wraps
// the one before it, in the manner of Nomad's feasibility iterators.
type iterator interface{ next() *entry }

type sliceSource struct {
	es []*entry
	i  int
}

func (s *sliceSource) next() *entry {
	if s.i == len(s.es) {
		return nil
	}
	s.i++
	return s.es[s.i-1]
}

// checker decides one thing about the candidate in ctx.
type checker interface{ ok(ctx *evalCtx) bool }

// checkIter passes on the candidates its checker accepts and counts the
// rest, which is what makes Explain possible.
type checkIter struct {
	src     iterator
	ctx     *evalCtx
	check   checker
	removed *int
}

func (it *checkIter) next() *entry {
	for {
		e := it.src.next()
		if e == nil {
			return nil
		}
		it.ctx.reset(&e.f)
		if it.check.ok(it.ctx) {
			return e
		}
		*it.removed++
	}
}

// live rejects expired offers. Withdrawn offers never reach the book.
type live struct{}

func (live) ok(ctx *evalCtx) bool { return ctx.now < ctx.f.expires && !ctx.f.withdrawn }

// stack builds the filter chain for one query run:
//
//  1. live first: expired offers never match whatever the query says, and
//     Explain reports them apart from the user's clauses;
//  2. then the clauses in the order written, so each rejection is charged
//     to the first clause it fails; a user who wants to know how many
//     offers a later clause alone would remove moves it to the front.
//
// Ranking and the limit come after, in Book.Query, over survivors only.
func (q *Query) stack(src iterator, ctx *evalCtx, ex *Explain) iterator {
	it := iterator(&checkIter{src: src, ctx: ctx, check: live{}, removed: &ex.Expired})
	for i := range q.clauses {
		it = &checkIter{src: it, ctx: ctx, check: &q.clauses[i], removed: &ex.Clauses[i].Removed}
	}
	return it
}

// Query returns the offers matching q, sorted by order and cut to limit
// (limit <= 0: all), with an Explain. order is a field name from
// QueryFields that is Orderable, with "-" in front for descending, or ""
// for provider ID order. Offers lacking the order value (a tier not
// offered, no GPUs selected) sort last either way; ties break by provider
// ID, so results are deterministic. Query reads the clock once.
func (b *Book) Query(q *Query, order string, limit int) ([]*Offer, *Explain, error) {
	key, desc, err := parseOrder(order)
	if err != nil {
		return nil, nil, err
	}
	es := b.entries() // the lock is not held while filtering
	ex := &Explain{Considered: len(es), Clauses: make([]ClauseStat, len(q.clauses))}
	for i := range q.clauses {
		ex.Clauses[i].Clause = q.clauses[i].String()
	}
	ctx := &evalCtx{q: q, now: b.now().Unix()}
	var matched []ranked
	it := q.stack(&sliceSource{es: es}, ctx, ex)
	for e := it.next(); e != nil; e = it.next() {
		r := ranked{e: e}
		if key != nil {
			var sel *gpuSel
			if key.sel {
				sel = ctx.selection() // ctx still holds e: the last stage accepted it
			}
			r.v, r.ok = key.num(&e.f, sel, ctx.now)
		}
		matched = append(matched, r)
	}
	ex.Matched = len(matched)
	sort.Slice(matched, func(i, j int) bool { return matched[i].less(&matched[j], desc) })
	if limit > 0 && len(matched) > limit {
		matched = matched[:limit]
	}
	out := make([]*Offer, len(matched))
	for i, r := range matched {
		out[i] = r.e.offer
	}
	return out, ex, nil
}

type ranked struct {
	e  *entry
	v  int64
	ok bool // v present
}

func (r *ranked) less(o *ranked, desc bool) bool {
	if r.ok != o.ok {
		return r.ok
	}
	if r.ok && r.v != o.v {
		return (r.v < o.v) != desc
	}
	return r.e.f.provider < o.e.f.provider
}

func parseOrder(order string) (*fieldDef, bool, error) {
	if order == "" {
		return nil, false, nil
	}
	name, desc := strings.CutPrefix(order, "-")
	fd := fieldByName[name]
	if fd == nil || !fd.Orderable {
		return nil, false, fmt.Errorf("%w: cannot order by %q (orderable: %s, with - for descending)",
			ErrBadQuery, order, fieldNames(true))
	}
	return fd, desc, nil
}
