package console

import (
	"context"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GPU history. The node keeps no record of its GPUs' temperature and
// power over time, so the console keeps one itself: every HistoryEvery
// (default a minute) it reads offer_show, as the GPUs page does, and
// keeps the last HistoryLen samples (default 360: six hours) per GPU in
// a fixed ring. Nothing is stored; a restart starts the charts afresh.

// gpuSample is one reading of one GPU.
type gpuSample struct {
	At     time.Time
	TempC  int
	PowerW float64
}

// ring is a bounded buffer of samples, oldest overwritten first.
type ring struct {
	buf  []gpuSample
	next int // where the next sample goes
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]gpuSample, n)} }

func (r *ring) add(s gpuSample) {
	r.buf[r.next] = s
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

func (r *ring) last() (gpuSample, bool) {
	if !r.full && r.next == 0 {
		return gpuSample{}, false
	}
	return r.buf[(r.next+len(r.buf)-1)%len(r.buf)], true
}

// samples returns the ring's samples, oldest first, as a copy.
func (r *ring) samples() []gpuSample {
	if !r.full {
		return append([]gpuSample(nil), r.buf[:r.next]...)
	}
	out := make([]gpuSample, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// history holds one ring per GPU index. mu guards gpus.
type history struct {
	mu   sync.Mutex
	size int
	gap  time.Duration // a sample closer than this to the last is dropped
	gpus map[int]*ring
	stop context.CancelFunc
	done chan struct{}
}

// maxHistoryGPUs bounds the rings: a node reporting more GPUs than this
// (a broken inventory) does not grow the console's memory without end.
const maxHistoryGPUs = 64

func newHistory(size int, every time.Duration) *history {
	return &history{size: size, gap: every / 2, gpus: map[int]*ring{}}
}

func (h *history) record(at time.Time, gs []gpuStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range gs {
		r := h.gpus[g.Index]
		if r == nil {
			if len(h.gpus) >= maxHistoryGPUs {
				continue
			}
			r = newRing(h.size)
			h.gpus[g.Index] = r
		}
		if last, ok := r.last(); ok && at.Sub(last.At) < h.gap {
			continue // a page read it a moment ago: keep the period even
		}
		r.add(gpuSample{At: at, TempC: g.TempC, PowerW: g.PowerW})
	}
}

func (h *history) samples(index int) []gpuSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.gpus[index]; r != nil {
		return r.samples()
	}
	return nil
}

// startHistory samples every HistoryEvery, until Close; the GPU pages
// add what they read too (record keeps one sample per half period). A
// HistoryEvery below zero keeps no history but the pages'.
func (c *Console) startHistory() *history {
	h := newHistory(c.opts.HistoryLen, c.opts.HistoryEvery)
	if c.opts.HistoryEvery < 0 {
		return h
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		t := time.NewTicker(c.opts.HistoryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.sampleGPUs(ctx, h)
			}
		}
	}()
	return h
}

func (c *Console) sampleGPUs(ctx context.Context, h *history) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var offer offerShow
	if err := c.opts.Caller.Call(ctx, "offer_show", nil, &offer); err != nil {
		if ctx.Err() == nil {
			c.opts.Log.Debug("console: sampling GPUs", "err", err)
		}
		return
	}
	h.record(c.opts.Now(), offer.GPUs)
}

// Close stops the console's GPU sampling. The pages keep working.
func (c *Console) Close() {
	if h := c.hist; h != nil && h.stop != nil {
		h.stop()
		<-h.done
	}
}

// lineChart draws samples as an SVG line over time, server-side, with
// its title, axis labels (first, last, lowest and highest values) and an
// aria-label giving the range and the latest value as text.
func lineChart(title, unit string, at []time.Time, values []float64) template.HTML {
	const w, h, top, bottom, left, right = 640, 200, 24, 32, 48, 8
	if len(values) == 0 || len(values) != len(at) {
		return template.HTML(`<p class="empty">` + html.EscapeString(title) + `: no samples yet (one a minute).</p>`)
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	span := hi - lo
	if span == 0 {
		span = 1
	}
	t0, t1 := at[0], at[len(at)-1]
	dt := t1.Sub(t0).Seconds()
	if dt <= 0 {
		dt = 1
	}
	num := func(v float64) string { return fmt.Sprintf("%.0f %s", v, unit) }
	x := func(t time.Time) float64 { return left + (w-left-right)*t.Sub(t0).Seconds()/dt }
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-(v-lo)/span) }
	clock := func(t time.Time) string { return t.UTC().Format("15:04") + " UTC" }
	summary := fmt.Sprintf("%s from %s to %s: lowest %s, highest %s, latest %s", title, clock(t0), clock(t1), num(lo), num(hi), num(values[len(values)-1]))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart line" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg"><title>%s</title>`,
		w, h, html.EscapeString(summary), html.EscapeString(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, left-4, top+4, html.EscapeString(num(hi)))
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, left-4, h-bottom, html.EscapeString(num(lo)))
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="start">%s</text>`, left, h-bottom+18, clock(t0))
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, w-right, h-bottom+18, clock(t1))
	b.WriteString(`<polyline class="series" fill="none" stroke="#0b5cad" stroke-width="2" points="`)
	for i, v := range values {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x(at[i]), y(v))
	}
	b.WriteString(`"/>`)
	last := len(values) - 1
	fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="3" fill="#0b5cad"/><text class="val" x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
		x(at[last]), y(values[last]), x(at[last])-6, max(y(values[last])-6, 12), html.EscapeString("now "+num(values[last])))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every piece of text above is escaped
}

// gpu is one GPU's page: its state now (offer_show) and the console's
// history of its temperature and power.
func (c *Console) gpu(w http.ResponseWriter, r *http.Request, se *session) {
	idx, err := strconv.Atoi(r.PathValue("index"))
	if err != nil {
		c.render(w, r, http.StatusNotFound, "error", se, map[string]any{"Title": "No such GPU", "Active": "gpus", "Error": "no GPU " + strconv.Quote(r.PathValue("index")) + ": GPUs are numbered as on the GPUs page"})
		return
	}
	var offer offerShow
	if err := c.opts.Caller.Call(r.Context(), "offer_show", nil, &offer); err != nil {
		c.fail(w, r, se, "gpus", err)
		return
	}
	c.hist.record(c.opts.Now(), offer.GPUs)
	var g *gpuStatus
	for i := range offer.GPUs {
		if offer.GPUs[i].Index == idx {
			g = &offer.GPUs[i]
		}
	}
	if g == nil {
		c.render(w, r, http.StatusNotFound, "error", se, map[string]any{"Title": "No such GPU", "Active": "gpus", "Error": fmt.Sprintf("this node has no GPU %d", idx)})
		return
	}
	ss := c.hist.samples(idx)
	at := make([]time.Time, len(ss))
	temp, power := make([]float64, len(ss)), make([]float64, len(ss))
	for i, s := range ss {
		at[i], temp[i], power[i] = s.At, float64(s.TempC), s.PowerW
	}
	d := map[string]any{"Title": fmt.Sprintf("GPU %d", idx), "Active": "gpus", "G": g, "Samples": len(ss),
		"Every": c.opts.HistoryEvery.String(), "Span": (time.Duration(c.opts.HistoryLen) * c.opts.HistoryEvery).String()}
	if !g.Simulated {
		d["Temp"] = lineChart(fmt.Sprintf("GPU %d temperature", idx), "°C", at, temp)
		d["Power"] = lineChart(fmt.Sprintf("GPU %d power draw", idx), "W", at, power)
	}
	c.render(w, r, http.StatusOK, "gpu", se, d)
}
