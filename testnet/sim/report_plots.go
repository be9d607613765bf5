package sim

import (
	"bytes"
	"fmt"
	"html/template"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotWidth and plotHeight are every plot's size.
const (
	plotWidth  = 16 * vg.Centimeter
	plotHeight = 9 * vg.Centimeter
)

// plotLine is one named line of a plot; style picks its colour and
// dashes, so that a strategy looks the same in every plot.
type plotLine struct {
	name   string
	style  int
	points []SeriesPoint
}

// plotSpec is one plot of the report.
type plotSpec struct {
	Title, XLabel, YLabel string
	lines                 []plotLine
}

// renderedPlot is a plot's title and its inline SVG.
type renderedPlot struct {
	Title string
	SVG   template.HTML
}

// reportPlots lays out the report's plots from its series: one line per
// strategy, in the report's order, and the market's adversaries.
func (r *Report) reportPlots(series Series) []plotSpec {
	style := map[string]int{}
	for i, sr := range r.Strategies {
		style[sr.Name] = i
	}
	perStrategy := func(curves []SeriesCurve, tier string) []plotLine {
		var lines []plotLine
		for _, c := range curves {
			if c.Tier == tier {
				lines = append(lines, plotLine{c.Strategy, style[c.Strategy], c.Points})
			}
		}
		return lines
	}
	specs := []plotSpec{
		{"Utilisation: GPUs in use over GPUs inside an open window", "day", "share", perStrategy(series.Utilisation, "")},
		{"Price paid as a share of on-demand (CDF over jobs)", "paid / on-demand", "share of jobs", perStrategy(series.PriceShare, "all")},
		{"Job completion time (CDF over completed jobs)", "hours", "share of jobs", perStrategy(series.JCT, "")},
		{"Income by provider, highest first", "share of providers", "credits per offered GPU-hour", perStrategy(series.Income, "")},
	}
	adversaries := plotSpec{Title: "Market: daily income per offered GPU-hour by provider behaviour", XLabel: "day", YLabel: "credits per offered GPU-hour"}
	for _, sr := range r.Strategies {
		if sr.Name != MarketStrategy {
			continue
		}
		for i, row := range sr.Adversaries {
			if row.Side != "provider" {
				continue
			}
			var pts []SeriesPoint
			for day, v := range row.DailyIncomePerOfferedGPUHour {
				pts = append(pts, SeriesPoint{float64(day), v})
			}
			adversaries.lines = append(adversaries.lines, plotLine{row.Behaviour, i, pts})
		}
	}
	return append(specs, adversaries)
}

// renderSVG draws a plot as an SVG element fit to sit inside HTML: the
// XML prolog and generator comment gonum writes first are dropped. The
// bytes depend only on the spec: gonum's SVG backend draws in order and
// formats numbers with fixed precision.
func renderSVG(spec plotSpec) (template.HTML, error) {
	p := plot.New()
	p.Title.Text = spec.Title
	p.X.Label.Text = spec.XLabel
	p.Y.Label.Text = spec.YLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	points := 0
	for _, l := range spec.lines {
		if len(l.points) == 0 {
			continue // gonum cannot range an empty line
		}
		xys := make(plotter.XYs, len(l.points))
		for i, pt := range l.points {
			xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		points += len(xys)
		line, err := plotter.NewLine(xys)
		if err != nil {
			return "", fmt.Errorf("plot %q, line %q: %w", spec.Title, l.name, err)
		}
		line.Color = plotutil.Color(l.style)
		line.Dashes = plotutil.Dashes(l.style)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	if points == 0 {
		// No data: give the axes a range so that the empty plot draws.
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		p.Title.Text += " (no data)"
	}
	canvas := vgsvg.New(plotWidth, plotHeight)
	p.Draw(draw.New(canvas))
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("plot %q: %w", spec.Title, err)
	}
	svg := buf.Bytes()
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	return template.HTML(svg), nil
}
