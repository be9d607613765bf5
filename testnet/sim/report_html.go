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

// htmlSection is one question the report answers, on a page of its own
// when printed: the figures that answer it, a column per strategy, and
// its plots.
type htmlSection struct {
	ID, Question, Intro string
	Rows                []htmlRow
	Plots               []renderedPlot
}

// htmlPage is what the report template reads.
type htmlPage struct {
	R        *Report
	Config   string
	Names    []string
	Sections []htmlSection  // the questions answered by figures and plots, in order
	Cheaters []renderedPlot // the adversaries' plots, beside their table
}

// WriteHTML writes the report as one self-contained page: inline CSS and
// SVG plots, no scripts, nothing fetched. Each question it answers is a
// section of its own (a page of its own when printed), its figures and
// plots together. Every value is escaped by html/template; only the SVG,
// which this package draws itself (gonum escapes the text in it), is
// trusted as HTML.
func (r *Report) WriteHTML(w io.Writer, series Series) error {
	page := htmlPage{R: r, Sections: metricSections(r.Strategies)}
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
		plot := renderedPlot{Section: spec.Section, Title: spec.Title, SVG: svg}
		if spec.Section == sectionCheaters {
			page.Cheaters = append(page.Cheaters, plot)
			continue
		}
		for i := range page.Sections {
			if page.Sections[i].ID == spec.Section {
				page.Sections[i].Plots = append(page.Sections[i].Plots, plot)
			}
		}
	}
	return reportPage.Execute(w, page)
}

// metricSections is every metric, one row each, a column per strategy,
// grouped by the question it answers. Money rows say their unit.
func metricSections(strategies []StrategyReport) []htmlSection {
	var sections []htmlSection
	var rows *[]htmlRow
	section := func(id, question, intro string) {
		sections = append(sections, htmlSection{ID: id, Question: question, Intro: intro})
		rows = &sections[len(sections)-1].Rows
	}
	add := func(label string, value func(m *Metrics) string) {
		row := htmlRow{Label: label}
		for i := range strategies {
			row.Values = append(row.Values, value(&strategies[i].Metrics))
		}
		*rows = append(*rows, row)
	}
	perTier := func(label string, value func(t *TierMetrics) string) {
		for i, tier := range reportTiers {
			add(tier+": "+label, func(m *Metrics) string { return value(&m.Tiers[i]) })
		}
	}

	section(sectionFill, "How much of the idle capacity is put to use?",
		"Sold GPU-hours count every run, useful ones only the jobs' progress kept; the bound is what no schedule could beat.")
	add("offered GPU-hours", func(m *Metrics) string { return htmlHours(m.OfferedGPUHours) })
	add("sold GPU-hours", func(m *Metrics) string { return htmlHours(m.SoldGPUHours) })
	add("useful GPU-hours", func(m *Metrics) string { return htmlHours(m.UsefulGPUHours) })
	add("filled share (sold / offered)", func(m *Metrics) string { return htmlShare(m.FilledShare) })
	add("useful share of the bound", func(m *Metrics) string { return htmlShare(m.UsefulShareOfBound) })
	perTier("jobs", func(t *TierMetrics) string { return fmt.Sprint(t.Jobs) })
	perTier("demanded GPU-hours", func(t *TierMetrics) string { return htmlHours(t.DemandedGPUHours) })
	perTier("useful GPU-hours", func(t *TierMetrics) string { return htmlHours(t.UsefulGPUHours) })

	section(sectionPrice, "What do renters pay?",
		"What renters paid, beside what the same useful GPU-hours cost at the on-demand price of the card they ran on.")
	perTier("paid (credits)", func(t *TierMetrics) string { return auction.FormatCredits(t.Paid) })
	perTier("on-demand cost (credits)", func(t *TierMetrics) string { return auction.FormatCredits(t.OnDemand) })
	perTier("cost share of on-demand", func(t *TierMetrics) string { return htmlShare(t.CostShare) })

	section(sectionTime, "How long do jobs wait, and how long do they take?",
		"Completed-only figures flatter a strategy that completes fewer jobs: the figures over all jobs count every unfinished job "+
			"as finishing at the run's end (censored), a lower bound on its real completion time.")
	perTier("completed", func(t *TierMetrics) string { return fmt.Sprintf("%s (%d)", htmlShare(t.CompletionShare), t.Completed) })
	perTier("wait p50 / p95 (completed)", func(t *TierMetrics) string {
		return htmlSecs(t.WaitP50Sec) + " / " + htmlSecs(t.WaitP95Sec)
	})
	perTier("JCT p50 / p95 / mean (completed)", func(t *TierMetrics) string {
		return htmlSecs(t.JCTP50Sec) + " / " + htmlSecs(t.JCTP95Sec) + " / " + htmlSecs(t.JCTMeanSec)
	})
	perTier("JCT p50 / p95 / mean (all jobs, censored)", func(t *TierMetrics) string {
		return htmlSecs(t.JCTAllP50Sec) + " / " + htmlSecs(t.JCTAllP95Sec) + " / " + htmlSecs(t.JCTAllMeanSec)
	})
	perTier("jobs counted at the run's end", func(t *TierMetrics) string { return fmt.Sprint(t.Censored) })

	section("reliability", "Are reservations honoured, and what does preemption cost?", "")
	add("gold: demanded / made / honoured", func(m *Metrics) string {
		return fmt.Sprintf("%d / %d / %d", m.Gold.Demanded, m.Gold.Made, m.Gold.Honoured)
	})
	add("gold: honoured share of made", func(m *Metrics) string { return htmlShare(m.Gold.HonouredShare) })
	add("gold: honoured share of demanded", func(m *Metrics) string { return htmlShare(m.Gold.HonouredOfDemanded) })
	perTier("lost to preemption (share of sold)", func(t *TierMetrics) string { return htmlShare(t.PreemptionLostShare) })
	perTier("preempted runs / ran again", func(t *TierMetrics) string { return fmt.Sprintf("%d / %d", t.PreemptedRuns, t.Returned) })

	if len(strategies) > 0 && strategies[0].Metrics.Gangs != nil {
		section("gangs", "How do gangs fare?",
			"A gang runs one job as members on distinct providers, placed and started together (issue 36). Its wait is from submit to "+
				"every member running; its preemption loss is what the members of a placement a preemption stopped ran past the last checkpoint.")
		gang := func(label string, value func(g *GangMetrics) string) {
			add(label, func(m *Metrics) string {
				if m.Gangs == nil {
					return "–"
				}
				return value(m.Gangs)
			})
		}
		gang("gangs / placed / completed", func(g *GangMetrics) string { return fmt.Sprintf("%d / %d / %d", g.Jobs, g.Placed, g.Completed) })
		gang("fill (useful / demanded GPU-hours)", func(g *GangMetrics) string {
			return fmt.Sprintf("%s (%s / %s)", htmlShare(g.FillShare), htmlHours(g.UsefulGPUHours), htmlHours(g.DemandedGPUHours))
		})
		gang("wait to every member running p50 / p95", func(g *GangMetrics) string { return htmlSecs(g.WaitP50Sec) + " / " + htmlSecs(g.WaitP95Sec) })
		gang("preempted placements / GPU-hours lost", func(g *GangMetrics) string {
			return fmt.Sprintf("%d / %s", g.PreemptedPlacements, htmlHours(g.PreemptionLostGPUHours))
		})
	}

	if len(strategies) > 0 && strategies[0].Metrics.Arrays != nil {
		section("arrays", "How fast do job arrays finish?",
			"A job array's shards are independent jobs, at most max_parallel placed at once (issue 36). Its makespan is from submit to its "+
				"last shard's end; its ideal is its shards run max_parallel at a time from submit, back to back.")
		array := func(label string, value func(a *ArrayMetrics) string) {
			add(label, func(m *Metrics) string {
				if m.Arrays == nil {
					return "–"
				}
				return value(m.Arrays)
			})
		}
		array("arrays / shards / arrays completed", func(a *ArrayMetrics) string {
			return fmt.Sprintf("%d / %d / %d", a.Arrays, a.Shards, a.Completed)
		})
		array("makespan p50 / p95", func(a *ArrayMetrics) string { return htmlSecs(a.MakespanP50Sec) + " / " + htmlSecs(a.MakespanP95Sec) })
		array("makespan over ideal p50 / p95", func(a *ArrayMetrics) string { return fmt.Sprintf("%.2f / %.2f", a.OverIdealP50, a.OverIdealP95) })
	}

	section(sectionIncome, "What do providers earn?", "Income per GPU-hour a provider offered, sold or not.")
	add("provider income per offered GPU-hour: mean (credits/GPU-h)", func(m *Metrics) string { return fmt.Sprintf("%.4f", m.Income.Mean) })
	add("provider income per offered GPU-hour: p10 / p50 / p90 (credits/GPU-h)", func(m *Metrics) string {
		return fmt.Sprintf("%.4f / %.4f / %.4f", m.Income.P10, m.Income.P50, m.Income.P90)
	})
	add("provider income: Gini", func(m *Metrics) string { return fmt.Sprintf("%.3f", m.Income.Gini) })

	section("traffic", "What does the market cost the network?", "Central baselines send nothing.")
	add("messages per job", func(m *Metrics) string { return fmt.Sprintf("%.1f", m.MessagesPerJob) })
	add("bytes per job", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.BytesPerJob) })
	add("gossip per node", func(m *Metrics) string { return fmt.Sprintf("%.2f KB/s", m.GossipBytesPerNodePerSec/1000) })
	return sections
}

func htmlHours(h float64) string           { return fmt.Sprintf("%.1f", h) }
func htmlShare(s float64) string           { return fmt.Sprintf("%.1f%%", 100*s) }
func htmlSecs(secs int64) string           { return (time.Duration(secs) * time.Second).String() }
func htmlNum(v float64) string             { return fmt.Sprintf("%.4g", v) }
func htmlCredits(c auction.Credits) string { return auction.FormatCredits(c) }

// htmlGoalValue is a goal's value and unit, or a dash when it was not
// tested (its value then means nothing).
func htmlGoalValue(g Goal) string {
	if !g.Tested() {
		return "–"
	}
	return htmlNum(g.Value) + " " + g.Unit
}

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"hours": htmlHours, "share": htmlShare, "num": htmlNum, "credits": htmlCredits, "goalValue": htmlGoalValue,
}).Parse(reportTemplate))

const reportTemplate = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Gleaner simulated market report (seed {{.R.Seed}})</title>
<style>
body{font-family:sans-serif;margin:2em;max-width:90em}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right;vertical-align:top}
td:first-child,th:first-child{text-align:left}
td.text{text-align:left;max-width:40em}
.met{color:#060}.missed{color:#a00;font-weight:bold}.untested{color:#666;font-style:italic}
pre{background:#f4f4f4;padding:1em;overflow:auto}
figure{margin:1em 0}
section{border-top:1px solid #999;margin-top:2em}
@media print{section{break-before:page;border:none}}
</style></head><body>
<h1>Gleaner simulated market</h1>
<p>A simulated market: the {{.R.Supply.Providers}} providers and their {{.R.Supply.GPUs}} GPUs are simulated from traces, not real machines.
Seed {{.R.Seed}}, report version {{.R.Version}}. Money is in credits (1 credit taken as 1 USD); prices and income in credits per GPU-hour (credits/GPU-h).</p>
<nav><ol>
<li><a href="#run">What was simulated?</a></li>
<li><a href="#strategies">What is each strategy, and what does it know?</a></li>
<li><a href="#goals">Did the market meet its goals?</a></li>
{{range .Sections}}<li><a href="#{{.ID}}">{{.Question}}</a></li>
{{end}}<li><a href="#cheaters">Do cheaters fall behind?</a></li>
<li><a href="#notes">Notes and configuration</a></li>
</ol></nav>

<section id="run"><h2>What was simulated?</h2>
<table><tr><th>model</th><th>providers</th><th>GPUs</th><th>on-demand (credits/GPU-h)</th></tr>
{{range .R.Supply.Models}}<tr><td>{{.Model}}</td><td>{{.Providers}}</td><td>{{.GPUs}}</td><td>{{credits .OnDemand}}</td></tr>
{{end}}</table>
<p>Offered {{hours .R.Supply.OfferedGPUHours}} GPU-hours; {{.R.Demand.Jobs}} jobs from {{.R.Demand.Renters}} renters demanding {{hours .R.Demand.DemandedGPUHours}} GPU-hours.
Upper bound: {{hours .R.Bound.GPUHours}} GPU-hours (slots of {{.R.Bound.SlotSec}} s){{with .R.Bound.ExactCheck}}; {{.}}{{end}}.</p>
<table><tr><th>jobs by</th><th>name</th><th>count</th><th>GPU-hours</th></tr>
{{range .R.Demand.Tiers}}<tr><td>tier</td><td>{{.Name}}</td><td>{{.Count}}</td><td>{{hours .GPUHours}}</td></tr>
{{end}}{{range .R.Demand.Kinds}}<tr><td>kind</td><td>{{.Name}}</td><td>{{.Count}}</td><td>{{hours .GPUHours}}</td></tr>
{{end}}</table>
<h3>How much of the supply do the max prices leave out?</h3>
<p>A job buys only from providers whose floor for its tier is at or under its max price. For the jobs of each tier, the share of the offered
GPU-hours that could otherwise serve them (model, GPUs, region) that their max price excludes, on average, and the jobs priced out of all of it.</p>
<table><tr><th>tier</th><th>jobs</th><th>median max price (credits/GPU-h)</th><th>supply excluded by price</th><th>jobs priced out</th></tr>
{{range .R.Demand.PriceReach}}<tr><td>{{.Tier}}</td><td>{{.Jobs}}</td><td>{{num .MaxPriceP50}}</td><td>{{share .ExcludedShare}}</td><td>{{.PricedOut}}</td></tr>
{{end}}</table>
<p>Sources: {{range .R.Supply.Sources}}{{.}}; {{end}}{{range .R.Demand.Sources}}{{.}}; {{end}}</p>
</section>

<section id="strategies"><h2>What is each strategy, and what does it know?</h2>
<table><tr><th>strategy</th><th>what it is</th><th>what it knows</th><th>what renters pay</th></tr>
{{range .R.Strategies}}<tr><td>{{.Name}}</td><td class="text">{{.About.What}}</td><td class="text">{{.About.Knows}}</td><td class="text">{{.About.Pays}}</td></tr>
{{end}}</table>
</section>

<section id="goals"><h2>Did the market meet its goals?</h2>
<p>A goal is <span class="untested">not tested</span> when the run held nothing to judge it on; it is then neither met nor missed.</p>
<table><tr><th>goal</th><th>target</th><th>strategy</th><th>value</th><th>status</th><th>why</th></tr>
{{range .R.Goals}}<tr><td>{{.Name}}</td><td>{{.Target}}</td><td>{{.Strategy}}</td><td>{{goalValue .}}</td>
<td>{{if .Met}}<span class="met">met</span>{{else if .Tested}}<span class="missed">missed</span>{{else}}<span class="untested">not tested</span>{{end}}</td><td class="text">{{.Why}}</td></tr>
{{end}}</table>
</section>
{{$names := .Names}}
{{range .Sections}}<section id="{{.ID}}"><h2>{{.Question}}</h2>
{{with .Intro}}<p>{{.}}</p>{{end}}
<table><tr><th>metric</th>{{range $names}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Label}}</td>{{range .Values}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{range .Plots}}<figure>{{.SVG}}<figcaption>{{.Title}}</figcaption></figure>
{{end}}</section>
{{end}}
<section id="cheaters"><h2>Do cheaters fall behind?</h2>
<table><tr><th>strategy</th><th>side</th><th>behaviour</th><th>providers / jobs</th><th>income per offered GPU-hour (credits/GPU-h)</th>
<th>first day below honest</th><th>behind honest from day</th><th>completed</th><th>paid per useful GPU-hour (credits/GPU-h)</th></tr>
{{range .R.Strategies}}{{$name := .Name}}{{range .Adversaries}}<tr><td>{{$name}}</td><td>{{.Side}}</td><td>{{.Behaviour}}</td>
{{if eq .Side "provider"}}<td>{{.Providers}}</td><td>{{num .IncomePerOfferedGPUHour}}</td><td>{{.FirstDayBelowHonest}}</td><td>{{.BehindFromDay}}</td><td></td><td></td>
{{else}}<td>{{.Jobs}}</td><td></td><td></td><td></td><td>{{share .CompletedShare}}</td><td>{{num .PaidPerUsefulGPUHour}}</td>{{end}}</tr>
{{end}}{{end}}</table>
{{range .Cheaters}}<figure>{{.SVG}}<figcaption>{{.Title}}</figcaption></figure>
{{end}}</section>

<section id="notes"><h2>Notes</h2>
<ul>{{range .R.Notes}}<li>{{.}}</li>{{end}}</ul>
<h2>Configuration (as the run used it)</h2>
<pre>{{.Config}}</pre>
</section>
</body></html>
`
