package sim

import (
	"slices"
	"strings"

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
	cursor  []int // per provider, its first window not yet over (time only moves on)
	now     func() int64
	whole   bool // tests: hand every round the whole book
}

func newBook(s *Supply, now func() int64) *book {
	b := &book{offers: make([]*auction.Offer, len(s.Providers)), index: map[string]int{}, byModel: map[string][]int{},
		views: map[string][]int{}, sp: s.Providers, cursor: make([]int, len(s.Providers)), now: now}
	for i, p := range s.Providers {
		k := strings.ToLower(p.Model)
		b.byModel[k] = append(b.byModel[k], i)
		b.all = append(b.all, i)
	}
	return b
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
	// outside its window, which the auctioneer's calendar check rejects
	// anyway: the view leaves those out, so the check runs on fewer.
	return &bookView{b: b, idx: idx, startsNow: spec.Tier != auction.Gold && !b.whole}
}

// openNow reports whether provider i's windows hold the present second.
func (b *book) openNow(i int) bool {
	ws, now := b.sp[i].Windows, b.now()
	c := b.cursor[i]
	for c < len(ws) && ws[c].End <= now {
		c++
	}
	b.cursor[i] = c
	return c < len(ws) && ws[c].Start <= now
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
}

// Snapshot is renter.Offers': a fresh slice of the shared offers.
func (v *bookView) Snapshot() []*auction.Offer {
	out := make([]*auction.Offer, 0, len(v.idx))
	for _, i := range v.idx {
		if o := v.b.offers[i]; o != nil && (!v.startsNow || v.b.openNow(i)) {
			out = append(out, o)
		}
	}
	return out
}
