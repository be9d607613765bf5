package gateway

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkGatewayOverhead compares small non-streamed completions sent
// straight to a replica on loopback with the same sent through the
// gateway, whose replica Dial is a plain TCP dial to it: what the gateway
// itself adds, without libp2p. Each iteration is a batch of 500 requests
// from 8 clients each way, so that -benchtime 1x still gives a p95.
// "server=instant" answers at once, so both sides measure HTTP plumbing
// alone and the CPUs it saturates; "server=1ms" takes a millisecond per
// answer, a (very fast) model's time, which is what a service's own
// clients compare against.
//
//	go test -run '^$' -bench GatewayOverhead -benchtime 1x ./node/gateway/
func BenchmarkGatewayOverhead(b *testing.B) {
	for _, work := range []time.Duration{0, time.Millisecond} {
		name := "server=instant"
		if work > 0 {
			name = "server=" + work.String()
		}
		b.Run(name, func(b *testing.B) { benchOverhead(b, work) })
	}
}

func benchOverhead(b *testing.B, work time.Duration) {
	const batch, clients = 500, 8
	model := modelHandler()
	be := newBackend(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if work > 0 {
			time.Sleep(work) // the model's time, not synchronisation
		}
		model.ServeHTTP(w, r)
	}))
	_, gwURL := startGateway(b, Config{Service: "bench"}, be.replica("r", 0))
	body := `{"model":"m","prompt":"hello there","max_tokens":16}`
	run := func(url string, c *http.Client) ([]time.Duration, time.Duration) {
		lats := make([][]time.Duration, clients)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range clients {
			wg.Go(func() {
				for range batch / clients {
					s := time.Now()
					resp, err := c.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
					lats[i] = append(lats[i], time.Since(s))
				}
			})
		}
		wg.Wait()
		return slices.Concat(lats...), time.Since(t0)
	}
	direct, via := newClient(b), newClient(b)
	// Warm both paths' connections before measuring.
	run(be.srv.URL, direct)
	run(gwURL, via)
	var dLat, gLat []time.Duration
	var dTime, gTime time.Duration
	for b.Loop() {
		l, d := run(be.srv.URL, direct)
		dLat, dTime = append(dLat, l...), dTime+d
		l, d = run(gwURL, via)
		gLat, gTime = append(gLat, l...), gTime+d
	}
	if len(dLat) == 0 || len(gLat) == 0 {
		return
	}
	p95 := func(xs []time.Duration) float64 {
		slices.Sort(xs)
		return float64(xs[len(xs)*95/100].Microseconds()) / 1000
	}
	dRate, gRate := float64(len(dLat))/dTime.Seconds(), float64(len(gLat))/gTime.Seconds()
	dp, gp := p95(dLat), p95(gLat)
	b.ReportMetric(dp, "direct-p95-ms")
	b.ReportMetric(gp, "gateway-p95-ms")
	b.ReportMetric(gp-dp, "added-p95-ms")
	b.ReportMetric(dRate, "direct-req/s")
	b.ReportMetric(gRate, "gateway-req/s")
	b.ReportMetric(gRate/dRate, "throughput-ratio")
	b.ReportMetric(0, "ns/op") // a batch's time says nothing; the figures above do
}
