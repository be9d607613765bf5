package console

import (
	"fmt"
	"html"
	"html/template"
	"strings"
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
