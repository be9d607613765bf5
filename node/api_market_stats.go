package node

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/ondemand"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// MarketStatsResult is market_stats' result: the offer book summarised
// (auction.BookStats) and, where the owner named a price list
// (market.on_demand_prices), the on-demand prices to weigh it against.
type MarketStatsResult struct {
	auction.BookStats
	// OnDemand is the list's median price per GPU-hour of each of
	// Prices' models it lists, matched by name regardless of case.
	OnDemand       map[string]auction.Credits `json:"on_demand,omitempty" doc:"micro-credits per GPU-hour, 1 credit taken as 1 USD, by the model names in prices"`
	OnDemandSource string                     `json:"on_demand_source,omitempty" doc:"the price list's file name; absent: none configured"`
	OnDemandError  string                     `json:"on_demand_error,omitempty" doc:"why the configured list could not be read"`
}

// onDemandList is the configured price list, read once: the config's
// validation read it at start, so an error here means the file changed.
type onDemandList struct {
	once sync.Once
	l    *ondemand.List
	err  error
}

func registerMarketStatsAPI(s *rpc.Server, n *Node) {
	var od onDemandList
	rpc.Register(s, "market_stats", rpc.MethodDoc{
		Summary:     "The offer book summarised: prices per GPU-hour by GPU model and tier (offers, GPUs, min, median, max) and supply by region, over live offers.",
		Description: "At most 32 models, most GPUs first (other_models counts the rest). With market.on_demand_prices set, on_demand gives that list's median on-demand price per GPU-hour of each model it lists; 1 credit is taken as 1 USD.",
	}, func(ctx context.Context, _ struct{}) (MarketStatsResult, error) {
		res := MarketStatsResult{BookStats: n.market.Book().Stats()}
		path := n.cfg.Market.OnDemandPrices
		if path == "" {
			return res, nil
		}
		od.once.Do(func() { od.l, od.err = ondemand.Load(path) })
		res.OnDemandSource = filepath.Base(path)
		if od.err != nil {
			res.OnDemandError = od.err.Error()
			return res, nil
		}
		res.OnDemand = onDemandFor(res.Prices, od.l.PerGPU)
		return res, nil
	})
}

// onDemandFor picks the list's price of each model in ps, by name
// regardless of case (the list says "H100", an offer may say "h100").
func onDemandFor(ps []auction.PriceStat, list map[string]auction.Credits) map[string]auction.Credits {
	lower := make(map[string]string, len(list))
	names := make([]string, 0, len(list))
	for k := range list {
		names = append(names, k)
	}
	sort.Strings(names) // of two spellings of one name, the first in order wins
	for _, k := range names {
		if _, ok := lower[strings.ToLower(k)]; !ok {
			lower[strings.ToLower(k)] = k
		}
	}
	out := map[string]auction.Credits{}
	for _, p := range ps {
		if k, ok := lower[strings.ToLower(p.Model)]; ok {
			out[p.Model] = list[k]
		}
	}
	return out
}
