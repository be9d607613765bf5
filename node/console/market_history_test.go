package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
)

func statsFake(st *marketStats, calls *int) *fakeCaller {
	return &fakeCaller{results: map[string]any{
		"market_offers": marketOffers{Explain: &auction.Explain{}},
		"market_stats": func(any) (any, error) {
			*calls++
			return st, nil
		},
	}}
}

func TestMarketPagePricesAndSupply(t *testing.T) {
	now := t0
	st := &marketStats{BookStats: auction.BookStats{Offers: 3, GPUs: 5,
		Prices: []auction.PriceStat{
			{Model: "H100", Tier: auction.Bronze, Offers: 3, GPUs: 4, Simulated: 1, Min: 800_000, Median: 1_000_000, Max: 1_500_000},
			{Model: "H100", Tier: auction.Silver, Offers: 1, GPUs: 2, Min: 2_000_000, Median: 2_000_000, Max: 2_000_000},
			{Model: "RTX4090", Tier: auction.Bronze, Offers: 1, GPUs: 1, Min: 300_000, Median: 300_000, Max: 300_000},
		},
		Regions: []auction.SupplyStat{{Continent: "eu", Country: "DE", Offers: 2, GPUs: 3, Simulated: 1}, {Continent: "na", Country: "US", Offers: 1, GPUs: 2}}},
		OnDemand: map[string]auction.Credits{"H100": 2_250_000}, OnDemandSource: "prices.csv"}
	calls := 0
	c := testConsole(t, statsFake(st, &calls), func(o *Options) { o.Now = fixedClock(&now); o.HistoryEvery = -1 })
	ck, _ := login(t, c)
	for i := 0; i < 3; i++ { // three samples a minute apart: each view asks, as the last sample is older than HistoryEvery
		w := do(c, "GET", "/ui/market", nil, withCookie(ck))
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if i == 2 {
			body := w.Body.String()
			mustContain(t, body, "3 live offer(s), 5 GPU(s), as of 2026-05-04 12:02:00 UTC",
				"<td>H100</td><td>bronze</td><td>3 (1 <span class=\"tag\">simulated</span>)</td><td>4</td><td>0.8 credits/GPU-h</td><td>1 credits/GPU-h</td><td>1.5 credits/GPU-h</td><td>2.25 credits/GPU-h</td><td>44 %</td>",
				"<td>RTX4090</td><td>bronze</td><td>1</td><td>1</td><td>0.3 credits/GPU-h</td><td>0.3 credits/GPU-h</td><td>0.3 credits/GPU-h</td><td>—</td><td>—</td>",
				"the median per GPU-hour of each model in prices.csv (1 credit taken as 1 USD)",
				`H100 bronze price per GPU-hour from 12:00 UTC to 12:02 UTC: median: lowest 1 credits/GPU-h`, "on-demand: lowest 2.25 credits/GPU-h",
				`stroke-dasharray="8 4"`, `stroke-dasharray="2 3"`,
				"<td>eu</td><td>DE</td><td>2</td><td>3</td><td>1</td>", "GPUs on offer by continent. eu: 3 GPUs; na: 2 GPUs",
				`href="/ui/market?model=RTX4090"`)
			if strings.Contains(body, "RTX4090 bronze price per GPU-hour") {
				t.Error("charts of a model not picked")
			}
		}
		now = now.Add(time.Minute)
	}
	if calls != 3 {
		t.Errorf("market_stats called %d times for 3 views a minute apart", calls)
	}

	// Another model by ?model=, the search kept; a fresh sample is reused.
	now = now.Add(-59 * time.Second)
	w := do(c, "GET", "/ui/market?model=RTX4090&q=gpus%3E%3D1", nil, withCookie(ck))
	mustContain(t, w.Body.String(), "RTX4090 bronze price per GPU-hour", `href="/ui/market?model=H100&amp;q=gpus%3E%3D1"`)
	if calls != 3 {
		t.Errorf("a view within a minute of the last sample asked market_stats again (%d calls)", calls)
	}
	w = do(c, "GET", "/ui/market?model=%3Cb%3E", nil, withCookie(ck))
	mustContain(t, w.Body.String(), `id="model-error"`, "no live offer carries &lt;b&gt;", "H100 bronze price per GPU-hour")

	// Without a price list the page says so.
	st.OnDemand, st.OnDemandSource = nil, ""
	now = now.Add(time.Hour)
	w = do(c, "GET", "/ui/market", nil, withCookie(ck))
	mustContain(t, w.Body.String(), "No on-demand prices to compare with: none configured", "market.on_demand_prices")
}

func TestMarketHistoryBounds(t *testing.T) {
	h := newMarketHistory(5, time.Minute)
	st := &marketStats{}
	for i := 0; i < maxMarketKeys+10; i++ {
		st.Prices = append(st.Prices, auction.PriceStat{Model: strings.Repeat("m", 1+i%40) + string(rune('a'+i/40)), Tier: auction.Bronze, Median: 1})
	}
	for i := 0; i < 8; i++ {
		h.record(t0.Add(time.Duration(i)*time.Minute), st)
		h.record(t0.Add(time.Duration(i)*time.Minute+time.Second), st) // within the gap: dropped
	}
	if h.prices.keys() != maxMarketKeys {
		t.Errorf("%d rings, bound %d", h.prices.keys(), maxMarketKeys)
	}
	if n := len(h.samples(priceKey{"ma", auction.Bronze})); n != 5 {
		t.Errorf("%d samples kept, ring of 5", n)
	}
	// A model gone from the book for longer than the span loses its ring.
	h.record(t0.Add(time.Hour), &marketStats{BookStats: auction.BookStats{Prices: []auction.PriceStat{{Model: "new", Tier: auction.Gold}}}})
	if h.prices.keys() != 1 {
		t.Errorf("%d rings after every old model left", h.prices.keys())
	}
}

func TestServicePageCharts(t *testing.T) {
	now := t0
	sv := benchServices()[0]
	f := &fakeCaller{results: map[string]any{"service_status": func(any) (any, error) { return sv, nil }, "service_list": []serviceView{sv}}}
	c := testConsole(t, f, func(o *Options) { o.Now = fixedClock(&now); o.HistoryEvery = -1 })
	ck, _ := login(t, c)
	for i, p50 := range []time.Duration{20, 30, 25} {
		sv.Stats.Figures = gateway.Figures{QPS: float64(i + 1), LatencyP50: p50 * time.Millisecond, LatencyP95: 2 * p50 * time.Millisecond,
			PerKRequests: auction.Credits(1_000_000 * (i + 1)), PerMTokens: 5_000_000}
		if i < 2 {
			c.sampleServices(t.Context()) // the tick's reading
		} else {
			do(c, "GET", "/ui/services/svc-000", nil, withCookie(ck)) // a page view records too
		}
		now = now.Add(time.Minute)
	}
	w := do(c, "GET", "/ui/services/svc-000", nil, withCookie(ck)) // the fourth sample, as it was at the third
	mustContain(t, w.Body.String(), "4 sample(s)",
		"svc-000 throughput from 12:00 UTC to 12:03 UTC: lowest 1.00 req/s, highest 3.00 req/s, latest 3.00 req/s",
		"svc-000 latency from 12:00 UTC to 12:03 UTC: p50: lowest 20.0 ms, highest 30.0 ms, latest 25.0 ms; p95: lowest 40.0 ms, highest 60.0 ms, latest 50.0 ms",
		"p95: now 50.0 ms", "svc-000 cost per 1,000 requests from 12:00 UTC to 12:03 UTC: lowest 1 credits/1k requests, highest 3 credits/1k requests",
		"svc-000 cost per 1M tokens")

	// A service taken down loses its ring; the bound holds.
	f.results["service_list"] = []serviceView{}
	c.sampleServices(t.Context())
	if c.svcHist.samples("svc-000") != nil {
		t.Error("a service gone from service_list kept its samples")
	}
	for i := 0; i < maxHistoryServices+5; i++ {
		c.svcHist.record(now, strings.Repeat("s", i+1), &serviceStats{})
	}
	if c.svcHist.keys() != maxHistoryServices {
		t.Errorf("%d rings, bound %d", c.svcHist.keys(), maxHistoryServices)
	}
}
