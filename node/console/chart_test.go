package console

import (
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
	"time"
)

type svgText struct {
	Class  string  `xml:"class,attr"`
	X      float64 `xml:"x,attr"`
	Anchor string  `xml:"text-anchor,attr"`
	Body   string  `xml:",chardata"`
}

type svgCircle struct {
	CX float64 `xml:"cx,attr"`
}

type svgDoc struct {
	Texts   []svgText   `xml:"text"`
	Circles []svgCircle `xml:"circle"`
}

func parseSVG(t *testing.T, s string) svgDoc {
	t.Helper()
	var d svgDoc
	if err := xml.Unmarshal([]byte(s), &d); err != nil {
		t.Fatalf("not SVG: %v\n%s", err, s)
	}
	return d
}

// The latest value's label sits beside its point on the side with room:
// after a first sample (the point at the plot's left edge) it runs right,
// never back over the axis labels; once the line has length it ends left
// of the point, inside the plot.
func TestTimeChartLatestLabelStaysInThePlot(t *testing.T) {
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " req/s" }
	t0 := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	for _, n := range []int{1, 2, 30} {
		at := make([]time.Time, n)
		vals := make([]float64, n)
		for i := range n {
			at[i], vals[i] = t0.Add(time.Duration(i)*time.Minute), float64(i%3)+6.34
		}
		d := parseSVG(t, string(timeChart("Throughput", at, []series{{Values: vals}}, num)))
		if len(d.Circles) != 1 {
			t.Fatalf("%d samples: %d points drawn, want the latest", n, len(d.Circles))
		}
		px := d.Circles[0].CX
		var label *svgText
		for i := range d.Texts {
			if strings.HasPrefix(d.Texts[i].Body, "now ") {
				label = &d.Texts[i]
			}
		}
		if label == nil {
			t.Fatalf("%d samples: no latest-value label", n)
		}
		want := "now " + num(vals[n-1])
		switch {
		case label.Body != want:
			t.Errorf("%d samples: label %q, want %q", n, label.Body, want)
		case n == 1 && (label.Anchor != "start" || label.X <= px):
			t.Errorf("a first sample's label runs %s from x=%.1f, its point at x=%.1f: over the axis labels", label.Anchor, label.X, px)
		case n > 2 && (label.Anchor != "end" || label.X >= px):
			t.Errorf("%d samples: label runs %s from x=%.1f, its point at x=%.1f: out of the plot", n, label.Anchor, label.X, px)
		}
	}
}
