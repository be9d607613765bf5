package rpc

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// offerLike is a result shaped like the node's bigger records, so that the
// OpenRPC document of benchServer is about as large as the node's (~45 KB).
type offerLike struct {
	Peer     string            `json:"peer" doc:"provider peer ID"`
	Region   string            `json:"region" doc:"continent/country code"`
	GPUs     []nodeInfo        `json:"gpus" doc:"GPUs on offer"`
	Prices   map[string]uint64 `json:"prices" doc:"price per hour by tier, in micro-credits"`
	Weekly   []string          `json:"weekly,omitempty" doc:"weekly availability windows"`
	Images   []string          `json:"images,omitempty" doc:"container images allowed"`
	MaxHours int               `json:"max_hours" doc:"longest lease accepted"`
	Egress   bool              `json:"egress" doc:"whether jobs may reach the internet"`
}

type offerQuery struct {
	Query string `json:"query" doc:"filter expression, e.g. gpu.vram >= 24 and region = eu"`
	Order string `json:"order" doc:"sort key"`
	Limit int    `json:"limit" doc:"most offers returned"`
}

// discoverServer registers enough methods for a node-sized
// rpc.discover document.
func discoverServer(opts ...ServerOption) *Server {
	s := NewServer(testToken, append([]ServerOption{Info("gleaner node API", "0.4.2")}, opts...)...)
	for i := range 28 {
		Register(s, fmt.Sprintf("bench_method%02d", i),
			MethodDoc{Summary: "A method shaped like market_offers", Description: strings.Repeat("Describes the method at some length. ", 4)},
			func(context.Context, offerQuery) ([]offerLike, error) { return nil, nil })
	}
	return s
}

// countingWriter is a ResponseWriter that keeps nothing, so the benchmark
// measures the server's own allocations, not a recorder's copy.
type countingWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.h }
func (w *countingWriter) WriteHeader(s int)   { w.status = s }
func (w *countingWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

func discoverBatch(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"rpc.discover"}`, i)
	}
	b.WriteByte(']')
	return b.String()
}

// BenchmarkBatchDiscover serves a batch of 100 rpc.discover calls (the
// cheapest way for a token holder to ask for the most bytes) through the
// HTTP handler, with the default response budget and with none. B/op is
// the server's garbage per batch; reply-bytes is what goes on the wire;
// discover-bytes is one document (node-sized).
func BenchmarkBatchDiscover(b *testing.B) {
	for _, bc := range []struct {
		name   string
		budget int
	}{{"budget=1MiB", 0}, {"budget=off", 1 << 40}} {
		b.Run(bc.name, func(b *testing.B) {
			s := discoverServer(MaxRequestBytes(1<<20), ResponseBudget(bc.budget))
			h := s.Handler()
			body := discoverBatch(100)
			serve := func() *countingWriter {
				req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				req.Host = "127.0.0.1:4031"
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Content-Type", "application/json")
				w := &countingWriter{h: http.Header{}}
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
				return w
			}
			one, err := s.discoverJSON()
			if err != nil {
				b.Fatal(err)
			}
			var n int
			b.ReportAllocs()
			for b.Loop() {
				n = serve().n
			}
			b.ReportMetric(float64(n), "reply-bytes")
			b.ReportMetric(float64(len(one)), "discover-bytes")
		})
	}
}
