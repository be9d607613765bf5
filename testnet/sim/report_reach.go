package sim

import (
	"slices"
	"sort"

	"github.com/gleaner-net/gleaner/auction"
)

// TierPriceReach is how much of the supply one tier's max prices leave
// out: a job can only buy from a provider whose floor for its tier is at
// or under its max price, so a max price set too low quietly shrinks the
// market a job sees. Shares weigh providers by the GPU-hours they offer
// in the horizon.
type TierPriceReach struct {
	Tier string `json:"tier"`
	// Jobs is the tier's jobs that some provider could serve, price
	// aside (an acceptable model, enough GPUs, the region, the tier sold).
	Jobs int `json:"jobs"`
	// ExcludedShare is, averaged over those jobs, the share of the
	// offered GPU-hours of the providers that could serve the job, price
	// aside, whose floor for the tier is above the job's max price.
	ExcludedShare float64 `json:"excluded_share"`
	// PricedOut is how many of the jobs no such provider takes at their
	// max price: they cannot run at all.
	PricedOut int `json:"priced_out"`
	// MaxPriceP50 is the median of the jobs' max prices, credits per
	// GPU-hour.
	MaxPriceP50 float64 `json:"max_price_p50"`
}

// PriceReach measures, for gold, silver and bronze in turn, how much of
// s the max prices of d's jobs exclude over [0, horizon).
func PriceReach(s *Supply, d *Demand, horizon int64) []TierPriceReach {
	offered := offeredSeconds(s, horizon)
	type ladder struct {
		floors []auction.Credits // ascending
		cum    []int64           // cum[k]: weight of floors[0..k]
	}
	ladders := map[string]*ladder{}
	ladderOf := func(j *Job) *ladder {
		key := fitKey(j)
		if l, ok := ladders[key]; ok {
			return l
		}
		type fw struct {
			floor  auction.Credits
			weight int64
		}
		var fs []fw
		var total int64
		for i := range s.Providers {
			p := &s.Providers[i]
			if servesBarPrice(p, j) {
				fs = append(fs, fw{TierFloor(p.Floors, j.Tier), offered[i]})
				total += offered[i]
			}
		}
		if total == 0 {
			for k := range fs {
				fs[k].weight = 1 // none offers anything: count providers
			}
		}
		sort.SliceStable(fs, func(a, b int) bool { return fs[a].floor < fs[b].floor })
		l := &ladder{}
		var cum int64
		for _, f := range fs {
			cum += f.weight
			l.floors, l.cum = append(l.floors, f.floor), append(l.cum, cum)
		}
		ladders[key] = l
		return l
	}
	tiers := []auction.Tier{auction.Gold, auction.Silver, auction.Bronze}
	out := make([]TierPriceReach, len(tiers))
	excluded := make([]float64, len(tiers))
	prices := make([][]float64, len(tiers))
	for i, t := range tiers {
		out[i].Tier = string(t)
	}
	for i := range d.Jobs {
		j := &d.Jobs[i]
		k := tierSlot(j.Tier) - 1
		if k < 0 {
			continue
		}
		l := ladderOf(j)
		if len(l.floors) == 0 {
			continue
		}
		total := l.cum[len(l.cum)-1]
		n := sort.Search(len(l.floors), func(x int) bool { return l.floors[x] > j.MaxPrice })
		var admitted int64
		if n > 0 {
			admitted = l.cum[n-1]
		}
		out[k].Jobs++
		if admitted == 0 {
			out[k].PricedOut++
		}
		excluded[k] += 1 - float64(admitted)/float64(total)
		prices[k] = append(prices[k], creditsFloat(j.MaxPrice))
	}
	for k := range out {
		out[k].ExcludedShare = shareOf(excluded[k], float64(out[k].Jobs))
		slices.Sort(prices[k])
		out[k].MaxPriceP50 = nearestRank(prices[k], 50)
	}
	return out
}
