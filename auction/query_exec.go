package auction

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
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
// rest, which is what makes Explain possible. The count lives in the
// iterator, not in a shared Explain, so parallel chunks never write to one
// cache line.
type checkIter struct {
	src     iterator
	ctx     *evalCtx
	check   checker
	removed int
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
		it.removed++
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
//
// It returns the last stage and every stage, in order, to read counts from.
func (q *Query) stack(src iterator, ctx *evalCtx) (iterator, []*checkIter) {
	stages := []*checkIter{{src: src, ctx: ctx, check: live{}}}
	for i := range q.clauses {
		stages = append(stages, &checkIter{src: stages[i], ctx: ctx, check: &q.clauses[i]})
	}
	return stages[len(stages)-1], stages
}

// Query returns the offers matching q, sorted by order and cut to limit
// (limit <= 0: all), with an Explain. order is a field name from
// QueryFields that is Orderable, with "-" in front for descending, or ""
// for provider ID order. Offers lacking the order value (a tier not
// offered, no GPUs selected) sort last either way; ties break by provider
// ID, so results are deterministic. Query reads the clock once.
//
// Large books are filtered in parallel, one chunk per CPU, each chunk
// through its own stack; the chunks' Explains add up and the sort makes
// the result independent of how the book was split. With a limit, each
// chunk keeps only its best limit survivors (a bounded heap: O(n log
// limit), not a sort of every match), and only those are merged and
// sorted: the result is the same, since less is a total order.
func (b *Book) Query(q *Query, order string, limit int) ([]*Offer, *Explain, error) {
	key, desc, err := parseOrder(order)
	if err != nil {
		return nil, nil, err
	}
	if q == nil {
		q = &Query{} // every live offer
	}
	now := b.now().Unix()
	b.mu.RLock()
	es := b.list
	parts := make([]queryPart, max(1, min(runtime.GOMAXPROCS(0), len(es)/minChunk)))
	var wg sync.WaitGroup
	for w := range parts {
		lo, hi := len(es)*w/len(parts), len(es)*(w+1)/len(parts)
		parts[w].keep, parts[w].desc = limit, desc
		wg.Go(func() { parts[w].run(q, es[lo:hi], now, key) })
	}
	wg.Wait()
	b.mu.RUnlock()
	ex := &Explain{Considered: len(es), Clauses: make([]ClauseStat, len(q.clauses))}
	var matched []ranked
	for _, p := range parts {
		ex.Expired += p.ex.Expired
		for i := range ex.Clauses {
			ex.Clauses[i].Clause = q.clauses[i].String()
			ex.Clauses[i].Removed += p.ex.Clauses[i].Removed
		}
		matched = append(matched, p.matched...)
		ex.Matched += p.n
	}
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

// minChunk is the fewest offers worth a goroutine of their own.
const minChunk = 16 << 10

// queryPart is one chunk's share of a query run. With keep > 0, matched
// holds only the best keep survivors, as a heap whose root is the worst
// of them; n counts every survivor.
type queryPart struct {
	ex      Explain
	matched []ranked
	n       int
	keep    int
	desc    bool
}

// add counts r and keeps it if it is among the best keep so far.
func (p *queryPart) add(r ranked) {
	p.n++
	if p.keep <= 0 {
		p.matched = append(p.matched, r)
		return
	}
	h := p.matched
	if len(h) < p.keep {
		h = append(h, r)
		for i := len(h) - 1; i > 0; { // sift up: a worse entry rises
			up := (i - 1) / 2
			if !h[up].less(&h[i], p.desc) {
				break
			}
			h[up], h[i] = h[i], h[up]
			i = up
		}
		p.matched = h
		return
	}
	if !r.less(&h[0], p.desc) {
		return // no better than the worst kept
	}
	h[0] = r
	for i := 0; ; { // sift down: the worst child rises
		w, l, rt := i, 2*i+1, 2*i+2
		if l < len(h) && h[w].less(&h[l], p.desc) {
			w = l
		}
		if rt < len(h) && h[w].less(&h[rt], p.desc) {
			w = rt
		}
		if w == i {
			return
		}
		h[w], h[i] = h[i], h[w]
		i = w
	}
}

func (p *queryPart) run(q *Query, es []*entry, now int64, key *fieldDef) {
	ctx := &evalCtx{q: q, now: now, w: q.window(now)}
	ctx.w.memo = map[periodKey]bool{} // this chunk's own: the memo is not safe to share
	it, stages := q.stack(&sliceSource{es: es}, ctx)
	defer func() {
		p.ex.Expired = stages[0].removed
		p.ex.Clauses = make([]ClauseStat, len(q.clauses))
		for i := range q.clauses {
			p.ex.Clauses[i].Removed = stages[i+1].removed
		}
	}()
	for e := it.next(); e != nil; e = it.next() {
		r := ranked{e: e}
		if key != nil {
			var sel *gpuSel
			if key.sel {
				sel = ctx.selection() // ctx still holds e: the last stage accepted it
			}
			r.v, r.ok = key.num(&e.f, sel, ctx.w)
		}
		p.add(r)
	}
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
