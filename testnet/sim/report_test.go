package sim

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// rpReport is a report of the market and a baseline on the hand-built
// instance, with a configuration holding a map (encoding/json sorts its
// keys).
func rpReport(mutate func(*Strategy)) (*Report, Series) {
	s, d := rpSupply(), rpDemand()
	market, greedy := rpStrategy("market"), rpStrategy("greedy")
	greedy.Messages = Traffic{}
	if mutate != nil {
		mutate(&market)
	}
	strategies := []Strategy{greedy, market}
	config := map[string]any{"horizon": rpHorizon, "seed": 7, "sources": []string{"b", "a"}}
	r := NewReport(config, 7, s, d, strategies, 72000, 600, rpHorizon)
	r.Bound.ExactCheck = "not run"
	return r, ComputeSeries(s, d, strategies, rpHorizon)
}

func rpJSON(t *testing.T, r *Report) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReportJSONDeterministic(t *testing.T) {
	a, _ := rpReport(nil)
	b, _ := rpReport(nil)
	ja, jb := rpJSON(t, a), rpJSON(t, b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("the same inputs gave different JSON")
	}
	changed, _ := rpReport(func(st *Strategy) { st.Outcomes[1].Runs[0].Paid++ })
	if bytes.Equal(ja, rpJSON(t, changed)) {
		t.Fatal("a changed payment left the JSON unchanged")
	}
	var back struct {
		Version    int
		Supply     SupplySummary
		Demand     DemandSummary
		Strategies []StrategyReport
		Goals      []Goal
	}
	if err := json.Unmarshal(ja, &back); err != nil {
		t.Fatal(err)
	}
	if back.Version != ReportVersion || back.Supply.Providers != 3 || back.Supply.GPUs != 7 || back.Demand.Jobs != 5 {
		t.Errorf("summary: version %d, %d providers, %d GPUs, %d jobs", back.Version, back.Supply.Providers, back.Supply.GPUs, back.Demand.Jobs)
	}
	if len(back.Supply.Models) != 2 || back.Supply.Models[0].Model != "A100" || back.Supply.Models[0].GPUs != 3 {
		t.Errorf("models %+v, want A100 (3 GPUs) then H100", back.Supply.Models)
	}
	if tiers := back.Demand.Tiers; len(tiers) != 3 || tiers[0].Name != "gold" || tiers[2].Name != "bronze" || tiers[2].GPUHours != 6 {
		t.Errorf("demand tiers %+v, want gold, silver, bronze (6 GPU-h)", tiers)
	}
	if len(back.Strategies) != 2 || back.Strategies[1].Name != "market" || back.Strategies[1].Traffic.Messages != 50 {
		t.Errorf("strategies %+v", back.Strategies)
	}
	// Six goals for each of two strategies, the market's first.
	if len(back.Goals) != 12 || back.Goals[0].Strategy != "market" || back.Goals[1].Strategy != "greedy" {
		t.Errorf("goals %+v", back.Goals)
	}
	if !strings.Contains(string(ja), `"useful_share_of_bound"`) || strings.Contains(string(ja), `"UsefulShareOfBound"`) {
		t.Error("metrics are not under snake_case names")
	}
}

func TestReportAddGoal(t *testing.T) {
	r, _ := rpReport(nil)
	n := len(r.Goals)
	r.AddGoal(Goal{Name: "speed", Strategy: "market", Value: 3, Unit: "x", Met: true})
	if len(r.Goals) != n+1 || r.Goals[n].Name != "speed" {
		t.Errorf("AddGoal did not append: %+v", r.Goals[n:])
	}
}

func TestReportHTML(t *testing.T) {
	r, series := rpReport(nil)
	r.Strategies[0].Name = "<b>greedy</b>" // must be escaped, not markup
	var a, b bytes.Buffer
	if err := r.WriteHTML(&a, series); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&b, series); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same report gave different HTML")
	}
	page := a.String()
	// Utilisation; price for gold, silver and bronze; JCT over completed
	// and over all jobs; income; the adversaries.
	if got, want := strings.Count(page, "<svg"), len(r.reportPlots(series)); got != want || want != 8 {
		t.Errorf("%d <svg> elements, want %d (8 plots)", got, want)
	}
	if strings.Contains(page, "<?xml") {
		t.Error("the XML prolog leaked into the page")
	}
	for _, s := range []string{"market", "&lt;b&gt;greedy&lt;/b&gt;", "simulated market", "useful-of-bound", "skip"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	for _, s := range []string{"<b>greedy", "<script", "<link", "src="} {
		if strings.Contains(page, s) {
			t.Errorf("page holds %q", s)
		}
	}
}

func TestRenderSVGEmpty(t *testing.T) {
	svg, err := renderSVG(plotSpec{Title: "nothing", XLabel: "x", YLabel: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), "no data") {
		t.Errorf("empty plot: %.80s", svg)
	}
	// A strategy with no completed job has an empty curve beside others.
	_, err = renderSVG(plotSpec{Title: "some", lines: []plotLine{{name: "a"}, {name: "b", points: []SeriesPoint{{0, 0}, {1, 1}}}}})
	if err != nil {
		t.Errorf("a plot with one empty line: %v", err)
	}
}

// The page answers one question per section (a page each when printed),
// says what each strategy is and knows, gives money its units, and shows
// an untested goal as such.
func TestReportHTMLSections(t *testing.T) {
	r, series := rpReport(nil)
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf, series); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, s := range []string{
		"break-before:page",
		`<section id="fill"><h2>How much of the idle capacity is put to use?`,
		`<section id="price"><h2>What do renters pay?`,
		`<section id="time"><h2>How long do jobs wait, and how long do they take?`,
		`<section id="cheaters"><h2>Do cheaters fall behind?`,
		`<section id="strategies"><h2>What is each strategy, and what does it know?`,
		"asks for a lease of the work plus market.leasemargin",
		"all: paid (credits)", "all: on-demand cost (credits)", "on-demand (credits/GPU-h)",
		"provider income per offered GPU-hour: mean (credits/GPU-h)",
		"income per offered GPU-hour (credits/GPU-h)", "paid per useful GPU-hour (credits/GPU-h)",
		"JCT p50 / p95 / mean (all jobs, censored)",
		"How much of the supply do the max prices leave out?",
		`<span class="untested">not tested</span>`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	// Each plot sits in its question's section.
	for _, sec := range []string{"fill", "price", "time", "income", "cheaters"} {
		start := strings.Index(page, `<section id="`+sec+`">`)
		end := start + strings.Index(page[start:], "</section>")
		if start < 0 || !strings.Contains(page[start:end], "<svg") {
			t.Errorf("section %s has no plot", sec)
		}
	}
	// Greedy sends no messages: its gossip goal is not tested, not met.
	for _, g := range r.Goals {
		if g.Name == "gossip" && g.Strategy == "greedy" && (g.Met || g.Status != GoalNotTested) {
			t.Errorf("greedy's gossip goal: %+v", g)
		}
	}
}

// Every strategy the simulator runs says what it is, knows and pays.
func TestAboutStrategies(t *testing.T) {
	for _, n := range append([]string{MarketName}, BaselineNames()...) {
		a := AboutStrategy(n, 250)
		if a.What == "" || a.Knows == "" || a.Pays == "" {
			t.Errorf("%s: %+v", n, a)
		}
		if n != MarketName && (!strings.Contains(a.Knows, "exact length") || !strings.Contains(a.Pays, "250 bp")) {
			t.Errorf("%s: knows %q, pays %q; want the exact length and the fee", n, a.Knows, a.Pays)
		}
	}
}

// A plot's legend sits right of the plot area, over no curve, and two
// lines that coincide still differ in dashes, width and where their
// markers sit.
func TestPlotLegendOutsideAndLinesApart(t *testing.T) {
	same := []SeriesPoint{{0, 0}, {1, 0.5}, {2, 0.7}, {3, 0.9}, {4, 1}}
	svg, err := renderSVG(plotSpec{Title: "t", XLabel: "x", YLabel: "y", lines: []plotLine{
		{name: "alpha", style: 0, points: same}, {name: "beta", style: 1, points: same},
	}})
	if err != nil {
		t.Fatal(err)
	}
	page := string(svg)
	plotRight := plotWidth.Points()
	for _, name := range []string{"alpha", "beta"} {
		m := regexp.MustCompile(`<text x="([0-9.]+)"[^<]*>` + name + `</text>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no legend entry %q in %s", name, page)
		}
		if x, _ := strconv.ParseFloat(m[1], 64); x < plotRight {
			t.Errorf("legend entry %q at x %v, inside the plot area (right edge %v)", name, x, plotRight)
		}
	}
	for _, style := range []string{"stroke-width:3.5\"", "stroke-width:3;stroke-dasharray:6,2\""} {
		if !strings.Contains(page, style) {
			t.Errorf("no line drawn with %s", style)
		}
	}
	xys := plotter.XYs{{X: 0}, {X: 1}, {X: 2}, {X: 3}, {X: 4}, {X: 5}, {X: 6}, {X: 7}, {X: 8}, {X: 9}, {X: 10}, {X: 11}, {X: 12}, {X: 13}, {X: 14}, {X: 15}}
	a, b := markerPoints(xys, 0, 2), markerPoints(xys, 1, 2)
	if len(a) != markersPerLine || slices.Equal(a, b) {
		t.Errorf("markers of two coinciding lines: %v and %v; want %d each, apart", a, b, markersPerLine)
	}
}
