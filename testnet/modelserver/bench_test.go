package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkModelServerDirect is the direct baseline for the service
// gateway's overhead: non-streamed completions with no delays, from
// clients straight to the server over loopback. Each iteration is a
// batch of requests, so that -benchtime 1x still yields a p95.
func BenchmarkModelServerDirect(b *testing.B) {
	const batch = 1000
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ts := start(b, defaults(b))
			tr := &http.Transport{MaxIdleConnsPerHost: clients}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			body := `{"model":"gleaner-test-model","prompt":"hello there","max_tokens":16}`
			var lat []time.Duration
			var elapsed time.Duration
			for b.Loop() {
				lats := make([][]time.Duration, clients)
				var wg sync.WaitGroup
				t0 := time.Now()
				for c := range clients {
					wg.Go(func() {
						for range batch / clients {
							s := time.Now()
							resp, err := client.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
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
							lats[c] = append(lats[c], time.Since(s))
						}
					})
				}
				wg.Wait()
				elapsed += time.Since(t0)
				lat = append(lat, slices.Concat(lats...)...)
			}
			if len(lat) == 0 {
				return // the errors above say why
			}
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(0, "ns/op") // a batch's time says nothing; req/s does
		})
	}
}
