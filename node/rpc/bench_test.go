package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// nodeInfo is shaped like the node's info reply (~300 bytes encoded).
type nodeInfo struct {
	PeerID  string   `json:"peer_id"`
	Addrs   []string `json:"addrs"`
	Version string   `json:"version"`
	Network string   `json:"network"`
	Uptime  int64    `json:"uptime_s"`
}

var benchInfo = nodeInfo{
	PeerID:  "12D3KooWGRUVh5J9HtsnUVAnkb5CrDtDWZn5V6ELD6MzJoYKbLxY",
	Addrs:   []string{"/ip4/127.0.0.1/tcp/4001", "/ip4/192.168.1.20/udp/4001/quic-v1", "/ip6/::1/tcp/4001", "/ip4/203.0.113.7/udp/4001/quic-v1/webtransport"},
	Version: "gleaner/0.4.2-dev+9f1c2ab",
	Network: "gleaner-testnet-3",
	Uptime:  86400,
}

const benchReq = `{"jsonrpc":"2.0","id":1,"method":"node_info"}`

// benchServers starts our server and a bare net/http handler that writes
// the identical reply bytes, both on loopback behind real TCP.
func benchServers(b *testing.B) (rpcURL, bareURL string) {
	s := NewServer(testToken)
	Register(s, "node_info", MethodDoc{}, func(context.Context, struct{}) (nodeInfo, error) { return benchInfo, nil })
	res, _ := json.Marshal(benchInfo)
	reply := appendResponse(nil, json.RawMessage("1"), res, nil)
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply)
	})
	rs, bs := httptest.NewServer(s.Handler()), httptest.NewServer(bare)
	b.Cleanup(rs.Close)
	b.Cleanup(bs.Close)
	return rs.URL, bs.URL
}

func benchClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy, tr.MaxIdleConnsPerHost = nil, 64
	return &http.Client{Transport: tr}
}

// post sends one call; it reports failures with Error because it runs on
// load goroutines, where Fatal is not allowed.
func post(b testing.TB, c *http.Client, url string) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(benchReq)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n < 250 {
		b.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
}

// BenchmarkRPCThroughput puts the same parallel keep-alive load
// (4×GOMAXPROCS in-flight requests on one client) on our server and on the
// bare handler, b.N requests each, in alternating rounds so that noise from
// other processes on the machine hits both sides alike. ns/op and req/s are
// ours; bare-req/s the baseline; ratio = ours/bare.
func BenchmarkRPCThroughput(b *testing.B) {
	rpcURL, bareURL := benchServers(b)
	c := benchClient()
	workers := 4 * runtime.GOMAXPROCS(0)
	const rounds = 10
	var ours, bare time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for r := range rounds {
		n := b.N/rounds + boolInt(r < b.N%rounds)
		if r%2 == 0 {
			bare += timedLoad(b, c, bareURL, n, workers)
		}
		b.StartTimer()
		ours += timedLoad(b, c, rpcURL, n, workers)
		b.StopTimer()
		if r%2 == 1 {
			bare += timedLoad(b, c, bareURL, n, workers)
		}
	}
	oursRate, bareRate := float64(b.N)/ours.Seconds(), float64(b.N)/bare.Seconds()
	b.ReportMetric(oursRate, "req/s")
	b.ReportMetric(bareRate, "bare-req/s")
	b.ReportMetric(oursRate/bareRate, "ratio")
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// timedLoad sends n requests from workers goroutines and returns the wall
// time they took.
func timedLoad(b *testing.B, c *http.Client, url string, n, workers int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				post(b, c, url)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkRPCLatencyAt1k paces b.N calls at 1,000/s (about 3 s at
// -benchtime 3s) and reports percentiles of each call's latency from the
// moment it was sent. "p99-sched-ms" measures from the scheduled start
// instead, so a stall that delays later sends is not hidden by the pacing
// (it also includes the load generator's own timer slack).
func BenchmarkRPCLatencyAt1k(b *testing.B) {
	rpcURL, _ := benchServers(b)
	c := benchClient()
	post(b, c, rpcURL) // warm the connection
	lat, sched := make([]time.Duration, b.N), make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		at := start.Add(time.Duration(i) * time.Millisecond)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			post(b, c, rpcURL)
			done := time.Now()
			lat[i], sched[i] = done.Sub(sent), done.Sub(at)
		}()
	}
	wg.Wait()
	b.StopTimer()
	ms := func(d []time.Duration, q int) float64 {
		slices.Sort(d)
		return float64(d[len(d)*q/100]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(lat, 50), "p50-ms")
	b.ReportMetric(ms(lat, 99), "p99-ms")
	b.ReportMetric(ms(sched, 99), "p99-sched-ms")
}
