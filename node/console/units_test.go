package console

import (
	"net/http"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// The console shows a node's figures in the CLI's units and rounding
// (cmd/gleaner's offer show and market offers): an RTX 4090's 24564 MiB
// is 24 GiB (not 23), an offer free to the end of its 7-day horizon is
// available 7d+ (not 167h59m48s), and a simulated GPU's temperature is
// shown as the CLI shows it (not —).
func TestConsoleUnitsAreTheCLIs(t *testing.T) {
	for _, c := range []struct {
		mib  int
		want string
	}{{24564, "24 GiB"}, {81920, "80 GiB"}, {81559, "80 GiB"}, {1536, "2 GiB"}, {0, "0 GiB"}} {
		if got := gib(c.mib); got != c.want {
			t.Errorf("gib(%d) = %q, want %q", c.mib, got, c.want)
		}
	}
	for _, c := range []struct {
		secs int64
		want string
	}{{7*24*3600 - 12, "7d+"}, {7 * 24 * 3600, "7d+"}, {7*24*3600 - 61, "167h58m0s"}, {8*3600 + 59, "8h0m0s"}, {0, "0s"}} {
		if got := available(c.secs); got != c.want {
			t.Errorf("available(%d) = %q, want %q", c.secs, got, c.want)
		}
	}

	of := newOfferFake()
	var g gpuStatus
	g.Index, g.Model, g.VRAMMiB, g.TempC, g.PowerW, g.PowerLimitW, g.Simulated, g.Offered = 0, "RTX4090", 24564, 35, 19.4, 450, true, true
	of.gpus = []gpuStatus{g}
	f := of.caller()
	f.results["market_offers"] = marketOffers{Explain: &auction.Explain{Matched: 1, Considered: 1}, Offers: []offerView{{
		Provider: "12D3KooWExampleProvider", GPUs: []auction.GPU{{Model: "RTX4090", VRAMMiB: 24564, Simulated: true}}, GPUCount: 1, Simulated: true,
		Region: auction.Region{Continent: "eu", Country: "DE"}, Prices: map[string]auction.Credits{"bronze": 350_000, "silver": 600_000}, AvailableForS: 7*24*3600 - 12,
		InEffect: map[string]priceInEffect{"bronze": {Base: 350_000, Price: 350_000}, "silver": {Base: 600_000, Price: 1_200_000, Why: "peak x2 until 18:00 UTC"}}}}}
	f.results["market_stats"] = &marketStats{}
	c := testConsole(t, f, func(o *Options) { o.HistoryEvery = -1 })
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/market", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(), "<td>1× RTX4090 24 GiB <span class=\"tag\">simulated</span></td>", "<td>7d&#43;</td>", // html/template escapes the +
		// The price in effect, as the CLI shows it: a peak's price with the base beside it and why.
		`bronze 0.35 credits/GPU-h<br>silver 1.2 credits/GPU-h <span class="base">(base 0.6 credits/GPU-h)</span><br><small class="why">peak x2 until 18:00 UTC</small>`)
	w = do(c, "GET", "/ui/gpus", nil, withCookie(ck))
	mustContain(t, w.Body.String(), "RTX4090 (24 GiB)", `<td class="temp">35°C</td>`, "<td>19 W / 450 W</td>")
}
