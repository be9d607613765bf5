package sim

import (
	"slices"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// book is the renters' offer book: the latest offer of every provider as
// gossip delivered it. Every renter subscribes to the same shards, so one
// book serves them all; each round sees it through a view of the
// providers whose GPU model and region could suit the job, which is
// what an indexed book (node's query by capability key) hands the
// auctioneer before its own feasibility checks.
type book struct {
	offers  []*auction.Offer // by provider index; nil until the first arrives
	index   map[string]int   // peer ID -> provider index
	byModel map[string][]int // model (lower case) -> provider indexes, ascending
	all     []int
	views   map[string][]int // cache: the candidate providers of a (models, region) key
	sp      []Provider
	// open is every provider's windows with touching ones joined, as the
	// auctioneer's calendar check joins them; cursor is per provider its
	// first span not yet over (time only moves on). Both are kept apart
	// from sp so that a round's scan of thousands stays in cache.
	open   [][]Span
	cursor []int
	now    func() int64
	whole  bool // tests: hand every round the whole book
}

func newBook(s *Supply, now func() int64) *book {
	b := &book{offers: make([]*auction.Offer, len(s.Providers)), index: map[string]int{}, byModel: map[string][]int{},
		views: map[string][]int{}, sp: s.Providers, open: make([][]Span, len(s.Providers)), cursor: make([]int, len(s.Providers)), now: now}
	for i, p := range s.Providers {
		k := strings.ToLower(p.Model)
		b.byModel[k] = append(b.byModel[k], i)
		b.all = append(b.all, i)
		b.open[i] = joined(p.Windows)
	}
	return b
}

// joined is ws (sorted, not overlapping) with the windows that touch or
// overlap joined into one span, as auction's availableSecs reads them.
func joined(ws []Span) []Span {
	var out []Span
	for _, w := range ws {
		if n := len(out); n > 0 && w.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, w.End)
			continue
		}
		out = append(out, w)
	}
	return out
}

func (b *book) put(o *auction.Offer) {
	if i, ok := b.index[o.Provider]; ok {
		b.offers[i] = o
	}
}

// view is the book as one job's rounds see it.
func (b *book) view(spec *auction.JobSpec) *bookView {
	key := strings.Join(spec.Resources.Models, "|") + "/" + strings.Join(spec.Placement.Regions, "|")
	idx, ok := b.views[key]
	if b.whole {
		idx, ok = b.all, true
	}
	if !ok {
		idx = b.candidates(spec)
		b.views[key] = idx
	}
	// A job that starts now (silver, bronze) cannot use a provider
	// outside its window, and a silver one none whose window ends before
	// duration.max: the auctioneer's calendar check rejects those anyway
	// (an offer's windows are the provider's, clipped to the offer's
	// horizon, so never longer). The view leaves them out, so the checks
	// run on fewer.
	v := &bookView{b: b, idx: idx, startsNow: spec.Tier != auction.Gold && !b.whole}
	if spec.Tier == auction.Silver {
		v.need = int64(spec.Duration.Max / time.Second)
	}
	return v
}

// openFor reports whether provider i's joined windows hold now and at
// least need seconds from it.
func (b *book) openFor(i int, now, need int64) bool {
	ws := b.open[i]
	c := b.cursor[i]
	for c < len(ws) && ws[c].End <= now {
		c++
	}
	b.cursor[i] = c
	return c < len(ws) && ws[c].Start <= now && ws[c].End-now >= need
}

func (b *book) candidates(spec *auction.JobSpec) []int {
	var idx []int
	if len(spec.Resources.Models) == 0 {
		idx = b.all
	} else {
		for _, m := range spec.Resources.Models {
			idx = append(idx, b.byModel[strings.ToLower(m)]...)
		}
		slices.Sort(idx)
		idx = slices.Compact(idx)
	}
	if len(spec.Placement.Regions) == 0 {
		return idx
	}
	var out []int
	for _, i := range idx {
		if slices.Contains(spec.Placement.Regions, b.sp[i].Continent) {
			out = append(out, i)
		}
	}
	return out
}

type bookView struct {
	b         *book
	idx       []int
	startsNow bool
	need      int64 // seconds the window must still hold from now (silver)
}

// Snapshot is renter.Offers': a fresh slice of the shared offers.
func (v *bookView) Snapshot() []*auction.Offer {
	out := make([]*auction.Offer, 0, len(v.idx))
	now := v.b.now()
	for _, i := range v.idx {
		if o := v.b.offers[i]; o != nil && (!v.startsNow || v.b.openFor(i, now, v.need)) {
			out = append(out, o)
		}
	}
	return out
}
