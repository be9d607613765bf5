package console

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"
)

// barChart draws integer values as an SVG bar chart, server-side. It is
// readable without colour: each bar carries its value as text above it
// and its label below, the chart has a text title and an aria-label that
// lists every value, and bars are told apart by position, not hue.
// label formats a value with its unit (credits, GPU-hours).
func barChart(title string, labels []string, values []int64, label func(int64) string) template.HTML {
	const w, h, top, bottom, left = 640, 220, 28, 40, 8
	n := len(values)
	if n == 0 || n != len(labels) {
		return template.HTML(`<p class="empty">` + html.EscapeString(title) + `: nothing to chart yet.</p>`)
	}
	var maxV int64 = 1
	for _, v := range values {
		maxV = max(maxV, v)
	}
	slot := float64(w-2*left) / float64(n)
	bar := slot * 0.7
	var b strings.Builder
	var alt []string
	for i := range values {
		alt = append(alt, labels[i]+": "+label(values[i]))
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		w, h, html.EscapeString(title+". "+strings.Join(alt, "; ")))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, left, h-bottom, w-left, h-bottom)
	every := max(1, n/12) // at most ~12 axis labels: they stay legible at phone width
	for i, v := range values {
		bh := float64(h-top-bottom) * float64(max(v, 0)) / float64(maxV)
		x := float64(left) + float64(i)*slot + (slot-bar)/2
		y := float64(h-bottom) - bh
		fmt.Fprintf(&b, `<g><title>%s</title><rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
			html.EscapeString(alt[i]), x, y, bar, bh)
		if n <= 16 || v == maxV {
			fmt.Fprintf(&b, `<text class="val" x="%.1f" y="%.1f">%s</text>`, x+bar/2, y-4, html.EscapeString(label(v)))
		}
		if i%every == 0 {
			fmt.Fprintf(&b, `<text class="lbl" x="%.1f" y="%d">%s</text>`, x+bar/2, h-bottom+16, html.EscapeString(labels[i]))
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every piece of text above is escaped
}

// series is one line of a timeChart: its name for the legend (empty for
// a chart of one line) and one value per instant.
type series struct {
	Name   string
	Values []float64
}

// dashes tell a timeChart's lines apart without colour: solid, dashed,
// dotted, in the legend as on the lines.
var dashes = []string{"", "8 4", "2 3"}

// timeChart draws series over time as SVG lines, server-side: a title,
// axis labels (the first and last instants, the lowest and highest
// values), each line told apart by its dash pattern and named in a text
// legend with its latest value, and an aria-label giving each line's
// range and latest value as text. num formats a value with its unit.
func timeChart(title string, at []time.Time, ss []series, num func(float64) string) template.HTML {
	const w, bottom, right = 640, 32, 8
	top, h := 24, 200
	named := 0
	for _, s := range ss {
		if s.Name != "" {
			named++
		}
	}
	if named > 0 { // the legend stacks above the plot, one line a series
		top += 16 * named
		h += 16 * named
	}
	n := len(at)
	for _, s := range ss {
		if len(s.Values) != n {
			n = 0
		}
	}
	if n == 0 || len(ss) == 0 {
		return template.HTML(`<p class="empty">` + html.EscapeString(title) + `: no samples yet (one a minute).</p>`)
	}
	lo, hi := ss[0].Values[0], ss[0].Values[0]
	for _, s := range ss {
		for _, v := range s.Values {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	span := hi - lo
	if span == 0 {
		span = 1
	}
	// The axis labels sit left of the plot: room for the longer of them
	// at about 6.5 px a character of the 11 px font, within bounds.
	left := min(max(48, 13*max(len(num(hi)), len(num(lo)))/2+8), 220)
	t0, t1 := at[0], at[n-1]
	dt := t1.Sub(t0).Seconds()
	if dt <= 0 {
		dt = 1
	}
	x := func(t time.Time) float64 { return float64(left) + float64(w-left-right)*t.Sub(t0).Seconds()/dt }
	y := func(v float64) float64 { return float64(top) + float64(h-top-bottom)*(1-(v-lo)/span) }
	clock := func(t time.Time) string { return t.UTC().Format("15:04") + " UTC" }
	var parts []string
	for _, s := range ss {
		slo, shi := s.Values[0], s.Values[0]
		for _, v := range s.Values {
			slo, shi = min(slo, v), max(shi, v)
		}
		p := fmt.Sprintf("lowest %s, highest %s, latest %s", num(slo), num(shi), num(s.Values[n-1]))
		if s.Name != "" {
			p = s.Name + ": " + p
		}
		parts = append(parts, p)
	}
	summary := fmt.Sprintf("%s from %s to %s: %s", title, clock(t0), clock(t1), strings.Join(parts, "; "))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart line" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg"><title>%s</title>`,
		w, h, html.EscapeString(summary), html.EscapeString(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, left, h-bottom, w-right, h-bottom)
	if hi != lo { // a flat line: its one value is the bottom label
		fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, left-4, top+4, html.EscapeString(num(hi)))
	}
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, left-4, h-bottom, html.EscapeString(num(lo)))
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="start">%s</text>`, left, h-bottom+18, clock(t0))
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, w-right, h-bottom+18, clock(t1))
	for i, s := range ss {
		dash := ""
		if d := dashes[i%len(dashes)]; d != "" {
			dash = ` stroke-dasharray="` + d + `"`
		}
		fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="#0b5cad" stroke-width="2"%s points="`, dash)
		for k, v := range s.Values {
			if k > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(at[k]), y(v))
		}
		b.WriteString(`"/>`)
		last := s.Values[n-1]
		fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="3" fill="#0b5cad"/>`, x(at[n-1]), y(last))
		if s.Name == "" {
			// Beside the latest point, on the side with room: left of it
			// once the line has length, right of it while the point is
			// still at the left edge (a first sample), where a label
			// ending at the point would run over the axis labels.
			lx, anchor := x(at[n-1])-6, "end"
			if lx < float64(w)/2 {
				lx, anchor = x(at[n-1])+6, "start"
			}
			fmt.Fprintf(&b, `<text class="val" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`,
				lx, max(y(last)-6, 12), anchor, html.EscapeString("now "+num(last)))
			continue
		}
		// The legend, above the plot: a stretch of the line's own dash,
		// its name and its latest value.
		ly := 12 + 16*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#0b5cad" stroke-width="2"%s/><text class="lbl" x="%d" y="%d" text-anchor="start">%s</text>`,
			left, ly, left+28, ly, dash, left+34, ly+4, html.EscapeString(s.Name+": now "+num(last)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every piece of text above is escaped
}
