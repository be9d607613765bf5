package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
	if got, want := strings.Count(page, "<svg"), len(r.reportPlots(series)); got != want || want != 5 {
		t.Errorf("%d <svg> elements, want %d (5 plots)", got, want)
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
