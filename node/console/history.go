package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
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

func (s gpuSample) taken() time.Time { return s.At }

// history keeps one ring per GPU index, and stops the tick's sampling.
type history struct {
	*keyedRings[int, gpuSample]
	stop context.CancelFunc
	done chan struct{}
}

// maxHistoryGPUs bounds the rings: a node reporting more GPUs than this
// (a broken inventory) does not grow the console's memory without end.
const maxHistoryGPUs = 64

func newHistory(size int, every time.Duration) *history {
	return &history{keyedRings: newKeyedRings[int, gpuSample](size, maxHistoryGPUs, every/2)}
}

func (h *history) record(at time.Time, gs []gpuStatus) {
	for _, g := range gs {
		h.add(g.Index, gpuSample{At: at, TempC: g.TempC, PowerW: g.PowerW})
	}
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
				c.sampleServices(ctx)
				c.sampleMarket(ctx)
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

// lineChart draws one series of samples over time (timeChart, chart.go),
// its values formatted with unit.
func lineChart(title, unit string, at []time.Time, values []float64) template.HTML {
	return timeChart(title, at, []series{{Values: values}}, func(v float64) string { return fmt.Sprintf("%.0f %s", v, unit) })
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
	// A simulated GPU's readings are charted too, labelled so by the
	// page: they are what offer_show reports, and what its limits act on.
	d["Temp"] = lineChart(fmt.Sprintf("GPU %d temperature", idx), "°C", at, temp)
	d["Power"] = lineChart(fmt.Sprintf("GPU %d power draw", idx), "W", at, power)
	c.render(w, r, http.StatusOK, "gpu", se, d)
}
