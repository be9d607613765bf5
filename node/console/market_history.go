package console

import (
	"context"
	"fmt"
	"html/template"
	"net/url"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Market history. market_stats summarises the offer book now: prices per
// GPU-hour by model and tier, supply by region. Nothing keeps that over
// time, so the console does: on the GPUs' tick (HistoryEvery) it reads
// market_stats and keeps, per model and tier, HistoryLen samples of the
// minimum and median in a ring. The page draws them, with the on-demand
// price where the node has a list (market.on_demand_prices).
//
// Summarising 100,000 offers takes tens of milliseconds, so the page
// shows the latest sample while it is younger than two ticks, and asks
// market_stats itself only when there is none (the first view after a
// start) or the ticker is off and the sample is a minute old.

// marketStats is market_stats' result.
type marketStats struct {
	auction.BookStats
	OnDemand       map[string]auction.Credits `json:"on_demand"`
	OnDemandSource string                     `json:"on_demand_source"`
	OnDemandError  string                     `json:"on_demand_error"`
}

// priceSample is one model's price in one tier at one instant.
type priceSample struct {
	At          time.Time
	Min, Median auction.Credits
}

// maxMarketKeys bounds the rings: market_stats lists at most 32 models
// in three tiers. 96 × 360 samples of 40 bytes is about 1.4 MiB.
const maxMarketKeys = 3 * auction.MaxStatModels

type priceKey struct {
	Model string
	Tier  auction.Tier
}

func (s priceSample) taken() time.Time { return s.At }

// marketHistory holds the latest summary and one ring per model and
// tier. mu guards last and lastAt.
type marketHistory struct {
	mu     sync.Mutex
	gap    time.Duration
	keep   time.Duration // a ring not fed for this long is dropped
	prices *keyedRings[priceKey, priceSample]
	last   *marketStats
	lastAt time.Time
}

func newMarketHistory(size int, every time.Duration) *marketHistory {
	if every <= 0 { // no ticker: the pages' own readings, as often as a minute
		every = time.Minute
	}
	return &marketHistory{gap: every / 2, keep: time.Duration(size) * every,
		prices: newKeyedRings[priceKey, priceSample](size, maxMarketKeys, every/2)}
}

func (h *marketHistory) record(at time.Time, st *marketStats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && at.Sub(h.lastAt) < h.gap {
		return
	}
	h.last, h.lastAt = st, at
	// Models gone from the book for the whole span lose their rings.
	h.prices.dropUnless(func(_ priceKey, l priceSample) bool { return at.Sub(l.At) <= h.keep })
	for _, p := range st.Prices {
		h.prices.add(priceKey{p.Model, p.Tier}, priceSample{At: at, Min: p.Min, Median: p.Median})
	}
}

// forget drops the latest summary, so that the next page asks afresh
// (the benchmark's worst case).
func (h *marketHistory) forget() {
	h.mu.Lock()
	h.last = nil
	h.mu.Unlock()
}

// latest is the last summary and when it was taken, if younger than fresh.
func (h *marketHistory) latest(now time.Time, fresh time.Duration) (*marketStats, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil || now.Sub(h.lastAt) >= fresh {
		return nil, time.Time{}
	}
	return h.last, h.lastAt
}

func (h *marketHistory) samples(k priceKey) []priceSample { return h.prices.samples(k) }

func (c *Console) sampleMarket(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var st marketStats
	if err := c.opts.Caller.Call(ctx, "market_stats", nil, &st); err != nil {
		return
	}
	c.mkt.record(c.opts.Now(), &st)
}

// marketStatsNow is the latest sample if fresh, else market_stats now.
func (c *Console) marketStatsNow(ctx context.Context) (*marketStats, time.Time, error) {
	now := c.opts.Now()
	fresh := 2 * c.opts.HistoryEvery
	if fresh <= 0 {
		fresh = time.Minute
	}
	if st, at := c.mkt.latest(now, fresh); st != nil {
		return st, at, nil
	}
	var st marketStats
	if err := c.opts.Caller.Call(ctx, "market_stats", nil, &st); err != nil {
		return nil, time.Time{}, err
	}
	c.mkt.record(now, &st)
	return &st, now, nil
}

// priceRow is one line of the prices table.
type priceRow struct {
	auction.PriceStat
	OnDemand *auction.Credits
	// OfOnDemand is the median as a share of the on-demand price, in
	// whole percent, computed in integers.
	OfOnDemand string
}

// modelLink is a link to one model's charts, keeping the search.
type modelLink struct {
	Model   string
	Href    string
	Current bool
}

// maxModelParam bounds ?model=: longer than any model name an offer may
// carry.
const maxModelParam = 64

// marketData adds the summary, the charts of one model (?model=, else
// the one with the most GPUs) and the supply by region to d.
func (c *Console) marketData(ctx context.Context, d map[string]any, q url.Values) error {
	st, at, err := c.marketStatsNow(ctx)
	if err != nil {
		return err
	}
	d["Stats"], d["StatsAt"] = st, at
	model := q.Get("model")
	if len(model) > maxModelParam {
		model = ""
	}
	var rows []priceRow
	var links []modelLink
	seen := map[string]bool{}
	for _, p := range st.Prices {
		row := priceRow{PriceStat: p}
		if od, ok := st.OnDemand[p.Model]; ok && od > 0 {
			row.OnDemand = &od
			row.OfOnDemand = fmt.Sprintf("%d %%", (int64(p.Median)*100+int64(od)/2)/int64(od))
		}
		rows = append(rows, row)
		if !seen[p.Model] {
			seen[p.Model] = true
			v := url.Values{"model": {p.Model}}
			for _, k := range []string{"q", "order"} {
				if s := q.Get(k); s != "" {
					v.Set(k, s)
				}
			}
			links = append(links, modelLink{Model: p.Model, Href: "/ui/market?" + v.Encode()})
		}
	}
	if model == "" && len(links) > 0 {
		model = links[0].Model
	}
	if model != "" && !seen[model] {
		d["ModelError"] = "no live offer carries " + model + "; pick one below"
		model = ""
		if len(links) > 0 {
			model = links[0].Model
		}
	}
	for i := range links {
		links[i].Current = links[i].Model == model
	}
	d["Prices"], d["Models"], d["Model"] = rows, links, model
	d["PriceCharts"] = c.priceCharts(model, st)
	d["Every"] = c.opts.HistoryEvery.String()
	d["Span"] = (time.Duration(c.opts.HistoryLen) * c.opts.HistoryEvery).String()

	// Supply: GPUs per continent as bars, and every country as a table.
	var conts []string
	var gpus []int64
	for _, r := range st.Regions {
		if len(conts) == 0 || conts[len(conts)-1] != r.Continent {
			conts, gpus = append(conts, r.Continent), append(gpus, 0)
		}
		gpus[len(gpus)-1] += int64(r.GPUs)
	}
	d["SupplyChart"] = barChart("GPUs on offer by continent", conts, gpus, func(v int64) string { return fmt.Sprintf("%d GPUs", v) })
	return nil
}

// tierChart is one tier's chart, with the tier for its caption.
type tierChart struct {
	Tier  auction.Tier
	Chart template.HTML
}

// priceCharts draws model's price in each tier over time: the median
// (solid) and the minimum (dashed) per GPU-hour, and the on-demand price
// (dotted, as of now: the list has no history) where there is one.
func (c *Console) priceCharts(model string, st *marketStats) []tierChart {
	if model == "" {
		return nil
	}
	var out []tierChart
	for _, tier := range []auction.Tier{auction.Bronze, auction.Silver, auction.Gold} {
		ss := c.mkt.samples(priceKey{model, tier})
		if len(ss) == 0 {
			continue
		}
		at := make([]time.Time, len(ss))
		med, lo := make([]float64, len(ss)), make([]float64, len(ss))
		for i, s := range ss {
			at[i], med[i], lo[i] = s.At, float64(s.Median), float64(s.Min)
		}
		lines := []series{{Name: "median", Values: med}, {Name: "lowest", Values: lo}}
		if od, ok := st.OnDemand[model]; ok {
			flat := make([]float64, len(ss))
			for i := range flat {
				flat[i] = float64(od)
			}
			lines = append(lines, series{Name: "on-demand", Values: flat})
		}
		out = append(out, tierChart{tier, timeChart(fmt.Sprintf("%s %s price per GPU-hour", model, tier), at, lines,
			func(v float64) string { return auction.FormatCredits(auction.Credits(v)) + " credits/GPU-h" })})
	}
	return out
}
