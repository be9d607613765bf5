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

// plotLine is one named line of a plot; style picks its colour, dashes
// and marker, so that a strategy looks the same in every plot (its width
// follows its place among the plot's lines).
type plotLine struct {
	name   string
	style  int
	points []SeriesPoint
}

// plotSpec is one plot of the report: the question it answers (its
// section of the page) and its lines.
type plotSpec struct {
	Section               string
	Title, XLabel, YLabel string
	lines                 []plotLine
}

// renderedPlot is a plot's section, title and its inline SVG.
type renderedPlot struct {
	Section string
	Title   string
	SVG     template.HTML
}

// The report's sections that hold plots, by the question each answers.
const (
	sectionFill     = "fill"
	sectionPrice    = "price"
	sectionTime     = "time"
	sectionIncome   = "income"
	sectionCheaters = "cheaters"
)

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
		{sectionFill, "Utilisation: GPUs in use over GPUs inside an open window", "day", "share", perStrategy(series.Utilisation, "")},
	}
	for _, tier := range reportTiers[1:] {
		lines := perStrategy(series.PriceShare, tier)
		if !anyPoints(lines) {
			continue // the demand has no such jobs, or none did useful work
		}
		specs = append(specs, plotSpec{sectionPrice, fmt.Sprintf("Price paid by %s jobs as a share of on-demand (CDF over jobs)", tier),
			"paid / on-demand", "share of jobs", lines})
	}
	specs = append(specs,
		plotSpec{sectionTime, "Job completion time (CDF over completed jobs only)", "hours", "share of completed jobs", perStrategy(series.JCT, "")},
		plotSpec{sectionTime, "Job completion time, unfinished jobs counted at the run's end (CDF over all jobs)", "hours", "share of jobs",
			perStrategy(series.JCTAll, "")},
		plotSpec{sectionIncome, "Income by provider, highest first", "share of providers", "credits per offered GPU-hour", perStrategy(series.Income, "")},
	)
	adversaries := plotSpec{Section: sectionCheaters, Title: "Market: daily income per offered GPU-hour by provider behaviour",
		XLabel: "day", YLabel: "credits per offered GPU-hour"}
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

func anyPoints(lines []plotLine) bool {
	for _, l := range lines {
		if len(l.points) > 0 {
			return true
		}
	}
	return false
}

// plotColors are dark enough to tell apart on white, and in grey.
var plotColors = plotutil.DarkColors

// markersPerLine is how many markers each line carries: enough to tell
// lines apart where they lie on top of one another, few enough not to
// hide them.
const markersPerLine = 8

// renderSVG draws a plot as an SVG element fit to sit inside HTML: the
// XML prolog and generator comment gonum writes first are dropped. The
// legend sits to the right of the plot, never over a curve. Lines differ
// by colour, dash pattern, width (the first drawn widest, so that a line
// lying on another still shows its edges) and marker shape, with the
// markers of different lines at different places along them. The bytes
// depend only on the spec: gonum's SVG backend draws in order and formats
// numbers with fixed precision.
func renderSVG(spec plotSpec) (template.HTML, error) {
	canvas, err := drawPlot(spec, func(w, h vg.Length) vg.CanvasWriterTo { return vgsvg.New(w, h) })
	if err != nil {
		return "", err
	}
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

// drawPlot draws spec on a canvas that newCanvas makes, as wide as the
// plot and its legend.
func drawPlot(spec plotSpec, newCanvas func(w, h vg.Length) vg.CanvasWriterTo) (vg.CanvasWriterTo, error) {
	p := plot.New()
	p.Title.Text = spec.Title
	p.X.Label.Text = spec.XLabel
	p.Y.Label.Text = spec.YLabel
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.ThumbnailWidth = vg.Points(28)
	points := 0
	for k, l := range spec.lines {
		if len(l.points) == 0 {
			legend.Add(l.name + " (no data)")
			continue // gonum cannot range an empty line
		}
		xys := make(plotter.XYs, len(l.points))
		for i, pt := range l.points {
			xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		points += len(xys)
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %q, line %q: %w", spec.Title, l.name, err)
		}
		colour := plotColors[l.style%len(plotColors)]
		line.Color = colour
		line.Dashes = plotutil.Dashes(l.style)
		line.Width = vg.Points(max(1, 3.5-0.5*float64(k)))
		marks, err := plotter.NewScatter(markerPoints(xys, k, len(spec.lines)))
		if err != nil {
			return nil, fmt.Errorf("plot %q, line %q: %w", spec.Title, l.name, err)
		}
		marks.GlyphStyle = draw.GlyphStyle{Color: colour, Radius: vg.Points(3.5), Shape: plotutil.Shape(l.style)}
		p.Add(line, marks)
		legend.Add(l.name, line, marks)
	}
	if points == 0 {
		// No data: give the axes a range so that the empty plot draws.
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		p.Title.Text += " (no data)"
	}
	legendWidth := vg.Length(0)
	for _, l := range spec.lines {
		legendWidth = max(legendWidth, legend.TextStyle.Rectangle(" "+l.name+" (no data)").Max.X)
	}
	legendWidth += legend.ThumbnailWidth + vg.Points(12)
	canvas := newCanvas(plotWidth+legendWidth, plotHeight)
	dc := draw.New(canvas)
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	legend.Draw(draw.Crop(dc, plotWidth+vg.Points(6), 0, 0, -vg.Points(24)))
	return canvas, nil
}

// markerPoints picks markersPerLine points of line k of n, spread along
// it and shifted by k/n of the spacing, so that lines that coincide
// still show each one's markers.
func markerPoints(xys plotter.XYs, k, n int) plotter.XYs {
	m := min(markersPerLine, len(xys))
	out := make(plotter.XYs, 0, m)
	for i := range m {
		pos := (float64(i) + (float64(k)+0.5)/float64(max(n, 1))) / float64(m)
		out = append(out, xys[min(int(pos*float64(len(xys))), len(xys)-1)])
	}
	return out
}
