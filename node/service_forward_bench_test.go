package node

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/providing"
)

// BenchmarkServiceStream: completions of the model server's container,
// one keep-alive connection, over a forwarded service stream and straight
// to the container's IP (the daemon's own view): what the forwarder costs
// per round trip. Each iteration is 200 requests a way.
func BenchmarkServiceStream(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, j, addr := startModel(b, nil)
	r := newServiceRig(b, ctx, providing.DefaultForwardLimits())
	r.f.Add(j.ID(), r.renter.ID(), addr)
	const body = `{"model":"gleaner-test-model","prompt":"hello world","max_tokens":16}`
	run := func(c *http.Client, url string) (p95 time.Duration, perSec float64) {
		const n = 200
		lat := make([]time.Duration, 0, n)
		t0 := time.Now()
		for range n {
			s := time.Now()
			resp, err := c.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
			lat = append(lat, time.Since(s))
		}
		slices.Sort(lat)
		return lat[n*95/100], n / time.Since(t0).Seconds()
	}
	fwd := r.client(r.renter, j.ID())
	direct := &http.Client{Timeout: 30 * time.Second}
	b.ResetTimer()
	for range b.N {
		fp, fr := run(fwd, "http://service/v1/completions")
		dp, dr := run(direct, "http://"+addr.String()+"/v1/completions")
		b.ReportMetric(float64(fp.Microseconds()), "fwd-p95-µs")
		b.ReportMetric(fr, "fwd-req/s")
		b.ReportMetric(float64(dp.Microseconds()), "direct-p95-µs")
		b.ReportMetric(dr, "direct-req/s")
	}
}
