package console

import (
	"context"
	"strconv"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Service history. service_status gives a service's figures now (QPS
// over the gateway's window, latency percentiles, cost per 1,000 requests
// and per 1M tokens); nothing keeps them over time, so the console does,
// as it does for GPUs: on the same tick (HistoryEvery) it reads
// service_list and each service's service_status and keeps HistoryLen
// samples a service in a ring. At most maxHistoryServices services are
// kept; one that leaves service_list loses its ring.

// svcSample is one reading of one service's figures.
type svcSample struct {
	At       time.Time
	QPS      float64
	P50, P95 time.Duration
	PerK     auction.Credits // per 1,000 requests
	PerM     auction.Credits // per 1M tokens
}

func (s svcSample) taken() time.Time { return s.At }

// maxHistoryServices bounds the rings: 64 × 360 samples of 56 bytes is
// about 1.3 MiB at most.
const maxHistoryServices = 64

// svcHistory keeps one ring per service name.
type svcHistory struct {
	*keyedRings[string, svcSample]
}

func newSvcHistory(size int, every time.Duration) *svcHistory {
	return &svcHistory{newKeyedRings[string, svcSample](size, maxHistoryServices, every/2)}
}

func (h *svcHistory) record(at time.Time, name string, st *serviceStats) {
	if st == nil {
		return // the gateway is down: no figures, a gap in the line
	}
	h.add(name, svcSample{At: at, QPS: st.QPS, P50: st.LatencyP50, P95: st.LatencyP95, PerK: st.PerKRequests, PerM: st.PerMTokens})
}

// keep drops the rings of services not in names: they were taken down.
func (h *svcHistory) keep(names map[string]bool) {
	h.dropUnless(func(name string, _ svcSample) bool { return names[name] })
}

// sampleServices is the tick's reading of every service's figures. A
// node without services (or whose services are still starting) answers
// service_list with an error or nothing: no samples then.
func (c *Console) sampleServices(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var list []serviceView
	if err := c.opts.Caller.Call(ctx, "service_list", nil, &list); err != nil {
		return
	}
	names := map[string]bool{}
	for i, s := range list {
		names[s.Name] = true
		if i >= maxHistoryServices {
			continue
		}
		var v serviceView
		if err := c.opts.Caller.Call(ctx, "service_status", map[string]string{"name": s.Name}, &v); err != nil {
			continue
		}
		c.svcHist.record(c.opts.Now(), s.Name, v.Stats)
	}
	c.svcHist.keep(names)
}

// serviceCharts draws one service's history: throughput, latency p50 and
// p95 on one chart (solid and dashed), and the two costs.
func serviceCharts(name string, ss []svcSample) map[string]any {
	at := make([]time.Time, len(ss))
	qps, p50, p95, perK, perM := make([]float64, len(ss)), make([]float64, len(ss)), make([]float64, len(ss)), make([]float64, len(ss)), make([]float64, len(ss))
	for i, s := range ss {
		at[i], qps[i] = s.At, s.QPS
		p50[i], p95[i] = float64(s.P50)/float64(time.Millisecond), float64(s.P95)/float64(time.Millisecond)
		perK[i], perM[i] = float64(s.PerK), float64(s.PerM)
	}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" }
	cr := func(unit string) func(float64) string {
		return func(v float64) string { return auction.FormatCredits(auction.Credits(v)) + " " + unit }
	}
	return map[string]any{
		"QPSChart":     timeChart(name+" throughput", at, []series{{Values: qps}}, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " req/s" }),
		"LatencyChart": timeChart(name+" latency", at, []series{{Name: "p50", Values: p50}, {Name: "p95", Values: p95}}, ms),
		"PerKChart":    timeChart(name+" cost per 1,000 requests", at, []series{{Values: perK}}, cr("credits/1k requests")),
		"PerMChart":    timeChart(name+" cost per 1M tokens", at, []series{{Values: perM}}, cr("credits/1M tokens")),
		"HistSamples":  len(ss),
	}
}

// serviceHistoryInto records what the service page just read and adds
// the charts to its data.
func (c *Console) serviceHistoryInto(d map[string]any, v serviceView) {
	c.svcHist.record(c.opts.Now(), v.Name, v.Stats)
	for k, x := range serviceCharts(v.Name, c.svcHist.samples(v.Name)) {
		d[k] = x
	}
	d["Every"] = c.opts.HistoryEvery.String()
	d["Span"] = (time.Duration(c.opts.HistoryLen) * c.opts.HistoryEvery).String()
}
