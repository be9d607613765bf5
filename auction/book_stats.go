package auction

import (
	"cmp"
	"slices"
	"strings"
)

// PriceStat is one GPU model's prices in one tier across the live offers
// that carry the model and offer the tier: per GPU-hour, in Credits.
type PriceStat struct {
	Model     string  `json:"model"`
	Tier      Tier    `json:"tier"`
	Offers    int     `json:"offers"`
	GPUs      int     `json:"gpus" doc:"GPUs of this model in those offers"`
	Simulated int     `json:"simulated" doc:"of those offers, how many carry simulated GPUs"`
	Min       Credits `json:"min" doc:"micro-credits per GPU-hour"`
	Median    Credits `json:"median" doc:"micro-credits per GPU-hour; of an even count, the mean of the middle two"`
	Max       Credits `json:"max" doc:"micro-credits per GPU-hour"`
}

// SupplyStat is the live supply in one country.
type SupplyStat struct {
	Continent string `json:"continent"`
	Country   string `json:"country"`
	Offers    int    `json:"offers"`
	GPUs      int    `json:"gpus"`
	Simulated int    `json:"simulated_gpus" doc:"GPUs in offers that carry simulated GPUs"`
}

// BookStats summarise the live offers: prices by GPU model and tier and
// supply by region.
type BookStats struct {
	Offers int `json:"offers"`
	GPUs   int `json:"gpus"`
	// Prices are the MaxStatModels models with the most GPUs, each in the
	// tiers offered for it (gold, silver, bronze), most GPUs first;
	// OtherModels counts the models left out.
	Prices      []PriceStat  `json:"prices"`
	OtherModels int          `json:"other_models,omitempty"`
	Regions     []SupplyStat `json:"regions" doc:"by continent, then most GPUs first"`
}

// MaxStatModels bounds BookStats.Prices: the book holds what any peer
// gossips, and a flood of made-up model names must not make the summary
// as big as the book.
const MaxStatModels = 32

// maxStatRegions bounds BookStats.Regions likewise (countries are two
// letters: at most 676 exist on the wire).
const maxStatRegions = 256

// Stats summarises the live offers (unexpired, not withdrawn) as of now.
// It reads each offer's facts under the book's read lock, as a query
// does, in two passes: the first counts (offers, GPUs, regions, and how
// many prices each model and tier has), the second collects the prices
// of the MaxStatModels models kept into one buffer sized by the first,
// so nothing grows as it goes and the prices of models left out are
// never held. The medians are found after the lock is let go.
func (b *Book) Stats() BookStats {
	type tierAgg struct {
		n, gpus, simulated int
		prices             []Credits
	}
	type modelAgg struct {
		name  string // as the first offer spelled it (facts hold it lower case)
		gpus  int
		tiers [3]tierAgg // gold, silver, bronze, as facts.prices
	}
	type region struct{ continent, country string }
	now := b.now().Unix()
	var st BookStats
	models := map[string]*modelAgg{}
	regions := map[region]*SupplyStat{}
	b.mu.RLock()
	for _, e := range b.list {
		f := &e.f
		if now >= f.expires || f.withdrawn {
			continue
		}
		gpus := int(f.all.count)
		st.Offers++
		st.GPUs += gpus
		rk := region{f.continent, f.country}
		rs := regions[rk]
		if rs == nil {
			rs = &SupplyStat{Continent: e.offer.Region.Continent, Country: e.offer.Region.Country}
			regions[rk] = rs
		}
		rs.Offers++
		rs.GPUs += gpus
		if f.simulated {
			rs.Simulated += gpus
		}
		for _, g := range f.groups {
			m := models[g.model]
			if m == nil {
				m = &modelAgg{name: g.model}
				for _, og := range e.offer.GPUs {
					if strings.EqualFold(og.Model, g.model) {
						m.name = og.Model
						break
					}
				}
				models[g.model] = m
			}
			n := int(g.sel.count)
			m.gpus += n
			for t, p := range f.prices {
				if p > 0 {
					ta := &m.tiers[t]
					ta.n++
					ta.gpus += n
					if f.simulated {
						ta.simulated++
					}
				}
			}
		}
	}
	ms := make([]*modelAgg, 0, len(models))
	for _, m := range models {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, c *modelAgg) int { return cmp.Or(cmp.Compare(c.gpus, a.gpus), cmp.Compare(a.name, c.name)) })
	if len(ms) > MaxStatModels {
		st.OtherModels = len(ms) - MaxStatModels
		ms = ms[:MaxStatModels]
	}
	total := 0
	for _, m := range ms {
		for t := range m.tiers {
			total += m.tiers[t].n
		}
	}
	buf, off := make([]Credits, total), 0
	for _, m := range ms {
		for t := range m.tiers {
			n := m.tiers[t].n
			m.tiers[t].prices = buf[off : off : off+n] // appended to below, never past n
			off += n
		}
	}
	for _, e := range b.list {
		f := &e.f
		if now >= f.expires || f.withdrawn {
			continue
		}
		for _, g := range f.groups {
			m := models[g.model]
			if m.tiers[0].prices == nil && m.tiers[1].prices == nil && m.tiers[2].prices == nil {
				continue // a model left out
			}
			for t, p := range f.prices {
				if p > 0 {
					m.tiers[t].prices = append(m.tiers[t].prices, Credits(p))
				}
			}
		}
	}
	b.mu.RUnlock()

	for _, m := range ms {
		for t, tier := range []Tier{Gold, Silver, Bronze} {
			ta := &m.tiers[t]
			if ta.n == 0 {
				continue
			}
			lo, hi, med := spread(ta.prices)
			st.Prices = append(st.Prices, PriceStat{Model: m.name, Tier: tier, Offers: ta.n, GPUs: ta.gpus, Simulated: ta.simulated,
				Min: lo, Median: med, Max: hi})
		}
	}
	for _, r := range regions {
		st.Regions = append(st.Regions, *r)
	}
	slices.SortFunc(st.Regions, func(a, c SupplyStat) int {
		return cmp.Or(cmp.Compare(a.Continent, c.Continent), cmp.Compare(c.GPUs, a.GPUs), cmp.Compare(a.Country, c.Country))
	})
	if len(st.Regions) > maxStatRegions {
		st.Regions = st.Regions[:maxStatRegions]
	}
	return st
}

// spread is ps' lowest, highest and median (of an even count, the mean
// of the middle two), reordering ps. The median is found by selection,
// not a sort: linear, where sorting 100,000 prices was half of Stats'
// time.
func spread(ps []Credits) (lo, hi, med Credits) {
	n := len(ps)
	med = selectNth(ps, n/2)
	lo, hi = med, med
	for _, p := range ps {
		lo, hi = min(lo, p), max(hi, p)
	}
	if n%2 == 0 {
		below := ps[0] // selectNth left every price before n/2 no greater than ps[n/2]
		for _, p := range ps[:n/2] {
			below = max(below, p)
		}
		med = below + (med-below)/2
	}
	return lo, hi, med
}

// selectNth reorders ps so that ps[k] is what a sort would put there,
// every price before it no greater and every one after no less, and
// returns it (quickselect, the pivot the median of three).
func selectNth(ps []Credits, k int) Credits {
	lo, hi := 0, len(ps)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ps[mid] < ps[lo] {
			ps[mid], ps[lo] = ps[lo], ps[mid]
		}
		if ps[hi] < ps[lo] {
			ps[hi], ps[lo] = ps[lo], ps[hi]
		}
		if ps[hi] < ps[mid] {
			ps[hi], ps[mid] = ps[mid], ps[hi]
		}
		pivot := ps[mid]
		i, j := lo, hi
		for i <= j { // Hoare's partition: equal prices split between both sides
			for ps[i] < pivot {
				i++
			}
			for ps[j] > pivot {
				j--
			}
			if i <= j {
				ps[i], ps[j] = ps[j], ps[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return ps[k]
		}
	}
	return ps[k]
}
