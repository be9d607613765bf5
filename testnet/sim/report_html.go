package sim

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// htmlRow is one row of a side-by-side table: a label and a value per
// strategy.
type htmlRow struct {
	Label  string
	Values []string
}

// htmlPage is what the report template reads.
type htmlPage struct {
	R       *Report
	Config  string
	Names   []string
	Summary []htmlRow
	Plots   []renderedPlot
}

// WriteHTML writes the report as one self-contained page: inline CSS and
// SVG plots, no scripts, nothing fetched. Every value is escaped by
// html/template; only the SVG, which this package draws itself (gonum
// escapes the text in it), is trusted as HTML.
func (r *Report) WriteHTML(w io.Writer, series Series) error {
	page := htmlPage{R: r, Summary: summaryRows(r.Strategies)}
	for _, sr := range r.Strategies {
		page.Names = append(page.Names, sr.Name)
	}
	config, err := json.MarshalIndent(r.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("report config: %w", err)
	}
	page.Config = string(config)
	for _, spec := range r.reportPlots(series) {
		svg, err := renderSVG(spec)
		if err != nil {
			return err
		}
		page.Plots = append(page.Plots, renderedPlot{Title: spec.Title, SVG: svg})
	}
	return reportPage.Execute(w, page)
}

// summaryRows is every metric, one row each, a column per strategy.
func summaryRows(strategies []StrategyReport) []htmlRow {
	var rows []htmlRow
	add := func(label string, value func(m *Metrics) string) {
		row := htmlRow{Label: label}
		for i := range strategies {
			row.Values = append(row.Values, value(&strategies[i].Metrics))
		}
		rows = append(rows, row)
	}
	add("offered GPU-hours", func(m *Metrics) string { return htmlHours(m.OfferedGPUHours) })
	add("sold GPU-hours", func(m *Metrics) string { return htmlHours(m.SoldGPUHours) })
	add("useful GPU-hours", func(m *Metrics) string { return htmlHours(m.UsefulGPUHours) })
	add("filled share (sold / offered)", func(m *Metrics) string { return htmlShare(m.FilledShare) })
	add("useful share of the bound", func(m *Metrics) string { return htmlShare(m.UsefulShareOfBound) })
	for i, tier := range reportTiers {
		tm := func(m *Metrics) *TierMetrics { return &m.Tiers[i] }
		add(tier+": jobs", func(m *Metrics) string { return fmt.Sprint(tm(m).Jobs) })
		add(tier+": completed", func(m *Metrics) string { return htmlShare(tm(m).CompletionShare) })
		add(tier+": demanded GPU-hours", func(m *Metrics) string { return htmlHours(tm(m).DemandedGPUHours) })
		add(tier+": useful GPU-hours", func(m *Metrics) string { return htmlHours(tm(m).UsefulGPUHours) })
		add(tier+": paid", func(m *Metrics) string { return auction.FormatCredits(tm(m).Paid) })
		add(tier+": on-demand cost", func(m *Metrics) string { return auction.FormatCredits(tm(m).OnDemand) })
		add(tier+": cost share of on-demand", func(m *Metrics) string { return htmlShare(tm(m).CostShare) })
		add(tier+": lost to preemption (share of sold)", func(m *Metrics) string { return htmlShare(tm(m).PreemptionLostShare) })
		add(tier+": wait p50 / p95", func(m *Metrics) string { return htmlSecs(tm(m).WaitP50Sec) + " / " + htmlSecs(tm(m).WaitP95Sec) })
		add(tier+": JCT p50 / p95", func(m *Metrics) string { return htmlSecs(tm(m).JCTP50Sec) + " / " + htmlSecs(tm(m).JCTP95Sec) })
	}
	add("gold: demanded / made / honoured", func(m *Metrics) string {
		return fmt.Sprintf("%d / %d / %d", m.Gold.Demanded, m.Gold.Made, m.Gold.Honoured)
	})
	add("gold: honoured share of made", func(m *Metrics) string { return htmlShare(m.Gold.HonouredShare) })
	add("gold: honoured share of demanded", func(m *Metrics) string { return htmlShare(m.Gold.HonouredOfDemanded) })
	add("provider income per offered GPU-hour: mean", func(m *Metrics) string { return fmt.Sprintf("%.4f", m.Income.Mean) })
	add("provider income: p10 / p50 / p90", func(m *Metrics) string {
		return fmt.Sprintf("%.4f / %.4f / %.4f", m.Income.P10, m.Income.P50, m.Income.P90)
	})
	add("provider income: Gini", func(m *Metrics) string { return fmt.Sprintf("%.3f", m.Income.Gini) })
	add("messages per job", func(m *Metrics) string { return fmt.Sprintf("%.1f", m.MessagesPerJob) })
	add("bytes per job", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.BytesPerJob) })
	add("gossip per node", func(m *Metrics) string { return fmt.Sprintf("%.2f KB/s", m.GossipBytesPerNodePerSec/1000) })
	return rows
}

func htmlHours(h float64) string           { return fmt.Sprintf("%.1f", h) }
func htmlShare(s float64) string           { return fmt.Sprintf("%.1f%%", 100*s) }
func htmlSecs(secs int64) string           { return (time.Duration(secs) * time.Second).String() }
func htmlNum(v float64) string             { return fmt.Sprintf("%.4g", v) }
func htmlCredits(c auction.Credits) string { return auction.FormatCredits(c) }

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"hours": htmlHours, "share": htmlShare, "num": htmlNum, "credits": htmlCredits,
}).Parse(reportTemplate))

const reportTemplate = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Gleaner simulated market report (seed {{.R.Seed}})</title>
<style>
body{font-family:sans-serif;margin:2em;max-width:90em}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}
.met{color:#060}.missed{color:#a00;font-weight:bold}
pre{background:#f4f4f4;padding:1em;overflow:auto}
figure{margin:1em 0}
</style></head><body>
<h1>Gleaner simulated market</h1>
<p>A simulated market: the {{.R.Supply.Providers}} providers and their {{.R.Supply.GPUs}} GPUs are simulated from traces, not real machines.
Seed {{.R.Seed}}, report version {{.R.Version}}.</p>
<h2>Supply and demand</h2>
<table><tr><th>model</th><th>providers</th><th>GPUs</th><th>on-demand per GPU-hour</th></tr>
{{range .R.Supply.Models}}<tr><td>{{.Model}}</td><td>{{.Providers}}</td><td>{{.GPUs}}</td><td>{{credits .OnDemand}}</td></tr>
{{end}}</table>
<p>Offered {{hours .R.Supply.OfferedGPUHours}} GPU-hours; {{.R.Demand.Jobs}} jobs from {{.R.Demand.Renters}} renters demanding {{hours .R.Demand.DemandedGPUHours}} GPU-hours.
Upper bound: {{hours .R.Bound.GPUHours}} GPU-hours (slots of {{.R.Bound.SlotSec}} s){{with .R.Bound.ExactCheck}}; {{.}}{{end}}.</p>
<table><tr><th>jobs by</th><th>name</th><th>count</th><th>GPU-hours</th></tr>
{{range .R.Demand.Tiers}}<tr><td>tier</td><td>{{.Name}}</td><td>{{.Count}}</td><td>{{hours .GPUHours}}</td></tr>
{{end}}{{range .R.Demand.Kinds}}<tr><td>kind</td><td>{{.Name}}</td><td>{{.Count}}</td><td>{{hours .GPUHours}}</td></tr>
{{end}}</table>
<p>Sources: {{range .R.Supply.Sources}}{{.}}; {{end}}{{range .R.Demand.Sources}}{{.}}; {{end}}</p>
<h2>Goals</h2>
<table><tr><th>goal</th><th>target</th><th>strategy</th><th>value</th><th>met</th><th>why</th></tr>
{{range .R.Goals}}<tr><td>{{.Name}}</td><td>{{.Target}}</td><td>{{.Strategy}}</td><td>{{num .Value}} {{.Unit}}</td>
<td>{{if .Met}}<span class="met">met</span>{{else}}<span class="missed">missed</span>{{end}}</td><td>{{.Why}}</td></tr>
{{end}}</table>
<h2>Metrics</h2>
<table><tr><th>metric</th>{{range .Names}}<th>{{.}}</th>{{end}}</tr>
{{range .Summary}}<tr><td>{{.Label}}</td>{{range .Values}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
<h2>Adversaries</h2>
<table><tr><th>strategy</th><th>side</th><th>behaviour</th><th>providers / jobs</th><th>income per offered GPU-hour</th>
<th>first day below honest</th><th>behind honest from day</th><th>completed</th><th>paid per useful GPU-hour</th></tr>
{{range .R.Strategies}}{{$name := .Name}}{{range .Adversaries}}<tr><td>{{$name}}</td><td>{{.Side}}</td><td>{{.Behaviour}}</td>
{{if eq .Side "provider"}}<td>{{.Providers}}</td><td>{{num .IncomePerOfferedGPUHour}}</td><td>{{.FirstDayBelowHonest}}</td><td>{{.BehindFromDay}}</td><td></td><td></td>
{{else}}<td>{{.Jobs}}</td><td></td><td></td><td></td><td>{{share .CompletedShare}}</td><td>{{num .PaidPerUsefulGPUHour}}</td>{{end}}</tr>
{{end}}{{end}}</table>
<h2>Plots</h2>
{{range .Plots}}<figure>{{.SVG}}<figcaption>{{.Title}}</figcaption></figure>
{{end}}
<h2>Notes</h2>
<ul>{{range .R.Notes}}<li>{{.}}</li>{{end}}</ul>
<h2>Configuration</h2>
<pre>{{.Config}}</pre>
</body></html>
`
