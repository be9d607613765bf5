package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// offerFake answers offer_show and offer_set as a node does, applying
// offer_set's patch with the node's own offers.Patch, so that its
// messages are the RPC's.
type offerFake struct {
	s       offers.Settings
	patches []map[string]any
	leases  []leaseEntry
	gpus    []gpuStatus
}

func (o *offerFake) show() map[string]any {
	wk, err := auction.WeekPrices(&o.s.Calendar, o.s.Prices, o.s.OfferPricing(), time.Now())
	m := map[string]any{"offered": o.s.Ready() == nil, "settings": o.s, "gpus": o.gpus}
	if err == nil {
		m["week"] = wk
	}
	if err := o.s.Ready(); err != nil {
		m["reason"] = err.Error()
	}
	return m
}

func (o *offerFake) caller() *fakeCaller {
	return &fakeCaller{results: map[string]any{
		"node_info":      nodeInfo{PeerID: "12D3KooWProvider"},
		"ledger_balance": balance{},
		"offer_show":     func(any) (any, error) { return o.show(), nil },
		"lease_list":     func(any) (any, error) { return o.leases, nil },
		"offer_set": func(params any) (any, error) {
			p := params.(map[string]any)
			o.patches = append(o.patches, p)
			b, _ := json.Marshal(p)
			var patch offers.Patch
			if err := json.Unmarshal(b, &patch); err != nil {
				return nil, &rpc.Error{Code: rpc.CodeInvalidParams, Message: err.Error()}
			}
			s, err := patch.Apply(o.s)
			if err != nil {
				return nil, &rpc.Error{Code: rpc.CodeInvalidParams, Message: err.Error()}
			}
			o.s = s
			return o.show(), nil
		},
	}}
}

func newOfferFake() *offerFake {
	s := offers.DefaultSettings()
	s.Region = auction.Region{Continent: "eu", Country: "DE"}
	s.Prices = auction.Prices{Bronze: 400_000, Silver: 700_000}
	return &offerFake{s: s}
}

// formOf reads the offer form's fields back as the browser would send them.
func formOf(t *testing.T, page, csrf string) url.Values {
	t.Helper()
	v := url.Values{"csrf": {csrf}}
	for _, m := range regexp.MustCompile(`<input id="f-([a-z_]+)" name="[a-z_]+" value="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`(?s)<textarea id="f-([a-z_]+)"[^>]*>(.*?)</textarea>`).FindAllStringSubmatch(page, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="(was_[a-z_]+)" value="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	if strings.Contains(page, `name="egress" value="true" checked`) {
		v.Set("egress", "true")
	}
	return v
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&#43;", "+", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

func TestOfferFormEditsTheOffer(t *testing.T) {
	of := newOfferFake()
	f := of.caller()
	c := testConsole(t, f, func(o *Options) { o.HistoryEvery = -1 })
	ck, csrf := login(t, c)
	page := do(c, "GET", "/ui/offer", nil, withCookie(ck))
	if page.Code != http.StatusOK {
		t.Fatalf("GET /ui/offer: %d %s", page.Code, page.Body)
	}
	mustContain(t, page.Body.String(), `value="eu/DE"`, `name="price_bronze" value="0.4"`, `name="preempt_notice" value="1m"`, `name="workloads" value="batch"`)

	// Unchanged: nothing is sent.
	form := formOf(t, page.Body.String(), csrf)
	if w := do(c, "POST", "/ui/offer", form, withCookie(ck)); w.Code != http.StatusSeeOther || len(of.patches) != 0 {
		t.Fatalf("unchanged form: %d, %d patches", w.Code, len(of.patches))
	}

	// A bad value: the RPC's message by the field, the typed values kept.
	form.Set("price_bronze", "-1")
	form.Set("region", "eu/FR")
	w := do(c, "POST", "/ui/offer", form, withCookie(ck))
	_, want := offers.Patch{PriceBronze: ptr("-1")}.Apply(of.s)
	if w.Code != http.StatusBadRequest || want == nil {
		t.Fatalf("bad price: %d (want 400), Apply: %v", w.Code, want)
	}
	body := w.Body.String()
	mustContain(t, body, `id="e-price_bronze" role="alert">`+template_escape(want.Error()), `name="price_bronze" value="-1"`, `value="eu/FR"`)
	if of.s.Region.Country != "DE" {
		t.Error("a refused form changed the region")
	}

	// A good one: saved, and only the changed fields sent.
	form.Set("price_bronze", "0.55")
	form.Set("weekly", "mon-fri 19:00-08:00")
	form.Set("max_temperature_c", "83")
	form.Set("egress", "true")
	w = do(c, "POST", "/ui/offer", form, withCookie(ck))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/offer?saved=1" {
		t.Fatalf("good form: %d %s %s", w.Code, w.Header().Get("Location"), w.Body)
	}
	last := of.patches[len(of.patches)-1]
	if len(last) != 5 || last["price_bronze"] != "0.55" || last["max_temperature_c"] != 83 || last["egress"] != true {
		t.Errorf("sent %v", last)
	}
	if of.s.Prices.Bronze != 550_000 || of.s.Region.Country != "FR" || of.s.Limits.MaxTempC != 83 || !of.s.Policy.Egress || len(of.s.Calendar.Weekly) != 1 {
		t.Errorf("settings now %+v", of.s)
	}
	page = do(c, "GET", "/ui/offer?saved=1", nil, withCookie(ck))
	mustContain(t, page.Body.String(), `id="saved"`, `name="price_bronze" value="0.55"`, `name="weekly" value="mon,tue,wed,thu,fri 19:00-08:00"`)

	// Not a number where the RPC wants one: said by the field.
	form.Set("max_power_w", "lots")
	w = do(c, "POST", "/ui/offer", form, withCookie(ck))
	mustContain(t, w.Body.String(), `id="e-max_power_w"`, `value="lots"`)

	// A change made meanwhile (from the CLI) survives a form that showed
	// the old value and left it alone.
	form = formOf(t, do(c, "GET", "/ui/offer", nil, withCookie(ck)).Body.String(), csrf)
	of.s.Prices.Silver = 900_000
	form.Set("price_bronze", "0.5")
	if w := do(c, "POST", "/ui/offer", form, withCookie(ck)); w.Code != http.StatusSeeOther {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if last := of.patches[len(of.patches)-1]; len(last) != 1 || of.s.Prices.Silver != 900_000 || of.s.Prices.Bronze != 500_000 {
		t.Errorf("sent %v; silver now %d", last, of.s.Prices.Silver)
	}

	// The guards of every POST.
	form.Set("max_power_w", "300")
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("csrf", "guess")
	if w := do(c, "POST", "/ui/offer", bad, withCookie(ck)); w.Code != http.StatusForbidden {
		t.Errorf("wrong CSRF token: %d", w.Code)
	}
	if w := do(c, "POST", "/ui/offer", form, func(r *http.Request) { r.AddCookie(ck); r.Header.Set("Origin", "http://evil.example") }); w.Code != http.StatusForbidden {
		t.Errorf("another Origin: %d", w.Code)
	}
	if of.s.Limits.MaxPowerW != 0 {
		t.Error("a refused POST changed the settings")
	}
}

func ptr[T any](v T) *T { return &v }

// template_escape is html/template's escaping of text, for the few
// characters the messages hold.
func template_escape(s string) string {
	return strings.NewReplacer("&", "&amp;", `"`, "&#34;", "'", "&#39;", "<", "&lt;", ">", "&gt;", "+", "&#43;").Replace(s)
}

func TestCalendarPageShowsTheWeek(t *testing.T) {
	of := newOfferFake()
	of.s.Prices.Gold = 1_000_000
	s, err := offers.Patch{Weekly: ptr("mon-sun 06:00-22:00"), Peak: ptr("mon-sun 18:00-20:00 x1.5")}.Apply(of.s)
	if err != nil {
		t.Fatal(err)
	}
	of.s = s
	now := time.Now().UTC()
	start := time.Date(now.Year(), now.Month(), now.Day()+1, 10, 0, 0, 0, time.UTC)
	of.leases = []leaseEntry{{State: "awarded", Lease: &auction.Lease{JobID: "job-gold", Tier: auction.Gold, GPUs: 1, Start: start.Unix(), End: start.Add(2 * time.Hour).Unix()}},
		{State: "ended", Lease: &auction.Lease{JobID: "job-old", Tier: auction.Gold, Start: start.Unix(), End: start.Add(time.Hour).Unix()}}}
	c := testConsole(t, of.caller(), func(o *Options) { o.HistoryEvery = -1 })
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/calendar", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	day := start.Format("2006-01-02")
	mustContain(t, w.Body.String(), `<svg class="chart calendar"`, `id="legend"`,
		day+`</td><td>10:00–12:00</td>`, `reserved: gold <code>job-gold</code>`,
		`18:00–20:00</td>`+"\n"+`<td class="state">peak</td>`, `bronze 0.6 credits/GPU-h`, `gold 1.5 credits/GPU-h`,
		`00:00–06:00</td>`+"\n"+`<td class="state">off</td>`)
	if strings.Contains(w.Body.String(), "job-old") {
		t.Error("an ended lease shows as a reservation")
	}
}

func TestTimelineSVG(t *testing.T) {
	cal := auction.Calendar{TimeZone: "Europe/Berlin", Weekly: []auction.WeeklyWindow{{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, Start: "08:00", End: "20:00"}}}
	pr := &auction.Pricing{TimeZone: "Europe/Berlin", Periods: []auction.PricePeriod{{Weekly: auction.WeeklyWindow{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, Start: "12:00", End: "14:00"}, MultBP: 20_000}}}
	base := auction.Prices{Bronze: 500_000}
	from := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC) // a Monday
	wk, err := auction.WeekPrices(&cal, base, pr, from)
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation("Europe/Berlin")
	gold := time.Date(2026, 5, 5, 15, 0, 0, 0, loc)
	days, err := calendarDays(wk, base, []leaseEntry{{State: "started", Lease: &auction.Lease{JobID: "j<1>", Tier: auction.Gold, Start: gold.Unix(), End: gold.Add(90 * time.Minute).Unix()}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 7 || days[0].Date != "2026-05-04" || days[0].Day != "mon" {
		t.Fatalf("days: %+v", days[0])
	}
	want := map[int]string{0: hourOff, 7: hourOff, 8: hourOpen, 11: hourOpen, 12: hourPeak, 13: hourPeak, 14: hourOpen, 19: hourOpen, 20: hourOff}
	for h, st := range want {
		if days[0].States[h] != st {
			t.Errorf("mon %02d:00 is %s, want %s", h, days[0].States[h], st)
		}
	}
	if days[1].States[15] != hourReserved || days[1].States[16] != hourReserved || days[1].States[17] != hourOpen {
		t.Errorf("tue 15-17: %v", days[1].States[15:18])
	}
	var peak *calRun
	for i, r := range days[0].Runs {
		if r.State == hourPeak {
			peak = &days[0].Runs[i]
		}
	}
	if peak == nil || peak.From != "12:00" || peak.To != "14:00" || len(peak.Prices) != 1 || peak.Prices[0].Price != 1_000_000 {
		t.Errorf("peak run: %+v", peak)
	}
	svg := string(timelineSVG(days, wk.TimeZone))
	for _, s := range []string{`role="img"`, `aria-label="The coming week by hour (Europe/Berlin). mon 2026-05-04: 00:00-08:00 off, 08:00-12:00 open, 12:00-14:00 peak`,
		`<pattern id="cal-off"`, `<pattern id="cal-peak"`, `<pattern id="cal-gold"`, `>P</text>`, `>G</text>`, `>–</text>`, `gold job j&lt;1&gt;`, `bronze 1</title>`} {
		if !strings.Contains(svg, s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	if n := strings.Count(svg, "<rect x="); n != 7*24 {
		t.Errorf("%d hour cells, want %d", n, 7*24)
	}
	if strings.Contains(svg, "j<1>") {
		t.Error("a job ID is not escaped")
	}
}

func TestHistoryRing(t *testing.T) {
	r := newRing[gpuSample](3)
	if _, ok := r.last(); ok || len(r.samples()) != 0 {
		t.Fatal("a new ring is not empty")
	}
	for i := 1; i <= 5; i++ {
		r.add(gpuSample{TempC: i})
	}
	got := r.samples()
	if len(got) != 3 || got[0].TempC != 3 || got[2].TempC != 5 {
		t.Fatalf("after 5 into 3: %+v", got)
	}
	if l, _ := r.last(); l.TempC != 5 {
		t.Errorf("last %d", l.TempC)
	}
	got[0].TempC = 99
	if r.samples()[0].TempC != 3 {
		t.Error("samples shares the ring's memory")
	}

	h := newHistory(360, time.Minute)
	at := t0
	g := gpuStatus{}
	g.Index, g.TempC, g.PowerW = 2, 60, 300
	for i := 0; i < 1000; i++ {
		h.record(at, []gpuStatus{g})
		h.record(at.Add(10*time.Second), []gpuStatus{g}) // a page view between ticks: dropped
		at = at.Add(time.Minute)
	}
	if s := h.samples(2); len(s) != 360 || s[359].At != t0.Add(999*time.Minute) || s[0].At != t0.Add(640*time.Minute) {
		t.Fatalf("%d samples, %v..%v", len(s), s[0].At, s[len(s)-1].At)
	}
	if h.samples(0) != nil {
		t.Error("samples of a GPU never seen")
	}
	many := make([]gpuStatus, 100)
	for i := range many {
		many[i].Index = i
	}
	h.record(at, many)
	if h.keys() != maxHistoryGPUs {
		t.Errorf("%d rings, bound %d", h.keys(), maxHistoryGPUs)
	}
}

func TestHistorySamplesOnATickerUntilClose(t *testing.T) {
	of := newOfferFake()
	g := gpuStatus{}
	g.Index, g.Model, g.TempC, g.PowerW = 0, "RTX4090", 55, 210
	of.gpus = []gpuStatus{g}
	f := of.caller()
	f.results["offer_show"] = of.show() // a plain value: the sampler's goroutine reads it, nothing writes it
	c := New(Options{Token: testToken, Caller: &lockedCaller{f: f}, HistoryEvery: 5 * time.Millisecond})
	deadline := time.Now().Add(5 * time.Second)
	for len(c.hist.samples(0)) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no samples from the ticker")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Close()
	n := len(c.hist.samples(0))
	time.Sleep(30 * time.Millisecond)
	if m := len(c.hist.samples(0)); m != n {
		t.Errorf("sampling went on after Close: %d then %d", n, m)
	}
	if s := c.hist.samples(0)[0]; s.TempC != 55 || s.PowerW != 210 {
		t.Errorf("sample %+v", s)
	}
}

// lockedCaller serialises calls to a fakeCaller, whose call log is not
// safe for the sampler's goroutine and the test's at once.
type lockedCaller struct {
	mu sync.Mutex
	f  *fakeCaller
}

func (l *lockedCaller) Call(ctx context.Context, method string, params, result any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Call(ctx, method, params, result)
}

func TestGPUPageCharts(t *testing.T) {
	of := newOfferFake()
	var real, sim gpuStatus
	real.Index, real.Model, real.VRAMMiB, real.TempC, real.PowerW, real.PowerLimitW = 0, "RTX4090", 24576, 70, 320, 450
	sim.Index, sim.Model, sim.Simulated = 1, "RTX4090", true
	of.gpus = []gpuStatus{real, sim}
	now := t0
	c := testConsole(t, of.caller(), func(o *Options) { o.HistoryEvery = -1; o.Now = fixedClock(&now) })
	for i := 0; i < 10; i++ {
		g := real
		g.TempC = 50 + i
		c.hist.record(t0.Add(time.Duration(i-10)*time.Minute), []gpuStatus{g})
	}
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/gpus/0", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(), `11 sample(s)`, `GPU 0 temperature from 11:50 UTC to 12:00 UTC: lowest 50 °C, highest 70 °C, latest 70 °C`,
		`GPU 0 power draw`, `<polyline class="series"`, `320 W of 450 W`, `<dd id="temp">70°C</dd>`, `RTX4090 (24 GiB)`)
	// A simulated GPU shows and charts its readings as offer_show
	// reports them (the CLI's offer show prints them), labelled simulated.
	w = do(c, "GET", "/ui/gpus/1", nil, withCookie(ck))
	mustContain(t, w.Body.String(), `id="simulated">simulated`, `This GPU is simulated`, `<dd id="temp">0°C (simulated)</dd>`, `GPU 1 temperature`)
	if w := do(c, "GET", "/ui/gpus/7", nil, withCookie(ck)); w.Code != http.StatusNotFound {
		t.Errorf("GPU 7: %d", w.Code)
	}
	if w := do(c, "GET", "/ui/gpus/x", nil, withCookie(ck)); w.Code != http.StatusNotFound {
		t.Errorf("GPU x: %d", w.Code)
	}
	if got := string(lineChart("t", "W", nil, nil)); !strings.Contains(got, "no samples yet") {
		t.Errorf("empty chart: %s", got)
	}
}

// benchProvider gives the bench's node a full set of offer settings
// (every tier, a weekly calendar, price periods, limits), its week, and
// 1,000 leases of which 200 are gold reservations in the coming week.
func benchProvider(f *fakeCaller) {
	of := newOfferFake()
	of.s.Prices.Gold = 1_200_000
	s, err := offers.Patch{Weekly: ptr("mon-fri 18:00-08:00; sat,sun 00:00-24:00"), Peak: ptr("mon-fri 18:00-22:00 x1.5; sat,sun 10:00-16:00 gold=2"),
		Blackouts: ptr([]string{"2026-12-24T00:00:00+01:00/2026-12-27T00:00:00+01:00"}), Images: ptr([]string{"ghcr.io/acme/*", "docker.io/library/*"}),
		MaxTempC: ptr(83), MaxPowerW: ptr(320.0), Surge: ptr("0.5")}.Apply(of.s)
	if err != nil {
		panic(err)
	}
	of.s = s
	now := time.Now()
	for i := 0; i < 1000; i++ {
		l := &auction.Lease{JobID: fmt.Sprintf("job-%04d", i), Tier: auction.Bronze, GPUs: 1, Start: now.Add(-time.Duration(i) * time.Hour).Unix()}
		l.End = l.Start + 3600
		if i < 200 {
			l.Tier, l.Start = auction.Gold, now.Add(time.Duration(i)*40*time.Minute).Unix()
			l.End = l.Start + 1800
		}
		of.leases = append(of.leases, leaseEntry{Lease: l, State: "awarded"})
	}
	show := of.show()
	var gs []gpuStatus
	json.Unmarshal(must(json.Marshal(f.results["offer_show"])), &struct {
		GPUs *[]gpuStatus `json:"gpus"`
	}{&gs})
	show["gpus"] = gs
	f.results["offer_show"] = show
	f.results["lease_list"] = of.leases
}

// benchHistory fills every GPU's ring: HistoryLen samples a minute apart.
func benchHistory(c *Console) {
	var gs []gpuStatus
	for i := 0; i < 8; i++ {
		var g gpuStatus
		g.Index = i
		gs = append(gs, g)
	}
	gap := c.hist.gap
	c.hist.gap = 0 // the bench's console samples hourly; these are a minute apart
	defer func() { c.hist.gap = gap }()
	at := time.Now().Add(-time.Duration(c.opts.HistoryLen) * time.Minute)
	for i := 0; i < c.opts.HistoryLen; i++ {
		for j := range gs {
			gs[j].TempC, gs[j].PowerW = 50+i%30, 200+float64(i%150)
		}
		c.hist.record(at, gs)
		at = at.Add(time.Minute)
	}
	// Six hours of the book's summary and of the first service's figures.
	var st marketStats
	if err := c.opts.Caller.Call(context.Background(), "market_stats", nil, &st); err == nil {
		mg, sg := c.mkt.gap, c.svcHist.gap
		c.mkt.gap, c.svcHist.gap = 0, 0
		defer func() { c.mkt.gap, c.svcHist.gap = mg, sg }()
		sv := benchServices()[0]
		at = time.Now().Add(-time.Duration(c.opts.HistoryLen) * time.Minute)
		for i := 0; i < c.opts.HistoryLen; i++ {
			c.mkt.record(at, &st)
			sv.Stats.QPS, sv.Stats.LatencyP95 = float64(i%50), time.Duration(i%40)*time.Millisecond
			c.svcHist.record(at, sv.Name, sv.Stats)
			at = at.Add(time.Minute)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
