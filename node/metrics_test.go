package node

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/metrics"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/store"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// startMetricsNode starts an in-process node whose metrics.address is
// addr ("" = off).
func startMetricsNode(t *testing.T, ctx context.Context, addr, simulate string, quotaGiB int) *Node {
	t.Helper()
	return startNodeWith(t, ctx, func(c *repo.Config) {
		c.Metrics.Address, c.Provider.SimulateGPUs, c.Data.QuotaGiB = addr, simulate, quotaGiB
	}, Options{})
}

func scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// sample is the value of the series name{labels} (label pairs k, v, ...);
// false when it is not in fams.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func TestMetricsEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startMetricsNode(t, ctx, "127.0.0.1:0", "2xRTX4090", 3)
	url := n.MetricsURL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/metrics") {
		t.Fatalf("MetricsURL = %q", url)
	}
	hostileHost(t, ctx, n) // one peer
	tok, err := n.repo.Token()
	if err != nil {
		t.Fatal(err)
	}
	var info InfoResult
	if err := rpc.NewClient(n.RPCURL(), tok).Call(ctx, "node_info", nil, &info); err != nil {
		t.Fatal(err)
	}

	fams := scrape(t, url)
	want := func(v float64, name string, labels ...string) {
		t.Helper()
		got, ok := sample(fams, name, labels...)
		if !ok {
			t.Errorf("no %s%v in the scrape", name, labels)
		} else if got != v {
			t.Errorf("%s%v = %v, want %v", name, labels, got, v)
		}
	}
	want(1, "gleaner_build_info", "version", Version, "network", repo.NetworkLocal)
	want(float64(int64(3)<<30), "gleaner_data_store_bytes", "kind", "quota")
	want(0, "gleaner_data_store_bytes", "kind", "used")
	if p, _ := sample(fams, "gleaner_peers"); p < 1 {
		t.Errorf("gleaner_peers = %v with a peer connected", p)
	}
	for _, st := range jobStates {
		want(0, "gleaner_jobs", "state", st)
	}
	want(0, "gleaner_leases", "state", string(providing.LeaseStarted))
	want(2, "gleaner_gpus", "state", "available")
	want(0, "gleaner_gpu_faults_total", "kind", "xid") // simulated GPUs never fault
	want(0, "gleaner_gpu_faults_total", "kind", "ecc")
	if v, ok := sample(fams, "gleaner_offer_published"); !ok || (v != 0 && v != 1) {
		t.Errorf("gleaner_offer_published = %v, %v", v, ok)
	}
	want(100_000_000, "gleaner_balance_microcredits")
	want(0, "gleaner_earned_microcredits_total")
	if c, _ := sample(fams, "gleaner_rpc_request_duration_seconds", "code", "200"); c < 1 {
		t.Errorf("gleaner_rpc_request_duration_seconds{code=200} has %v samples after a call", c)
	}
	if _, ok := sample(fams, "gleaner_gpu_temperature_celsius", "index", "0", "model", "RTX4090"); !ok {
		t.Error("no gleaner_gpu_temperature_celsius for GPU 0")
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "gleaner_offers_in_book", "gleaner_p2p_streams", "gleaner_gossip_topic_peers"} {
		if fams[name] == nil {
			t.Errorf("no %s in the scrape", name)
		}
	}

	// /metrics only.
	resp, err := http.Get(strings.TrimSuffix(url, "/metrics") + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /: %s, want 404", resp.Status)
	}

	// A second node in the same process has a registry of its own.
	m := startMetricsNode(t, ctx, "127.0.0.1:0", "", 1)
	want2, _ := sample(scrape(t, m.MetricsURL()), "gleaner_data_store_bytes", "kind", "quota")
	if want2 != float64(int64(1)<<30) {
		t.Errorf("second node's quota = %v", want2)
	}

	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("metrics still served after Stop: %s", resp.Status)
	}
}

func TestMetricsOffWithoutAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startMetricsNode(t, ctx, "", "", 1)
	if u := n.MetricsURL(); u != "" {
		t.Errorf("MetricsURL = %q with metrics.address \"\"", u)
	}
	if n.MetricsRegistry() != nil {
		t.Error("a registry with metrics off")
	}
}

func TestMetricsRefusesRemoteAddress(t *testing.T) {
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.Metrics.Address = "0.0.0.0:4032"
	rp, err := repo.InitRepo(filepath.Join(t.TempDir(), "node"), repo.DefaultConfig(repo.NetworkLocal))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(rp, cfg, Options{InProcess: true, Logger: quietLog}); err == nil || !strings.Contains(err.Error(), "metrics.allow_remote") {
		t.Fatalf("New with metrics on 0.0.0.0: %v", err)
	}
	cfg.Metrics.AllowRemote = true
	if _, err := New(rp, cfg, Options{InProcess: true, Logger: quietLog}); err != nil {
		t.Fatalf("with allow_remote: %v", err)
	}
}

// BenchmarkMetricsScrape is one whole scrape (collect, encode) of a node
// with 1,000 jobs in the renter's history and 1,000 lease records, as
// Prometheus would make it. The target: under 5 ms.
func BenchmarkMetricsScrape(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), repo.StoreFile))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	jobs := make(map[string]*renting.JobRecord, 1000)
	lease := make([]byte, 600) // about a co-signed lease's size
	_, _ = rand.Read(lease)
	err = st.Update(func(tx *store.Tx) error {
		for i := range 1000 {
			id := fmt.Sprintf("job-%04d", i)
			jobs[id] = &renting.JobRecord{ID: id, State: jobStates[i%len(jobStates)], Attempts: 1 + i%3, Lease: lease}
			rec := providing.Record{Lease: lease, State: leaseStates[i%len(leaseStates)], Updated: time.Now()}
			if err := tx.Put(store.BucketLeases, id, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.Metrics.Address = "127.0.0.1:0"
	recs := make([]renting.JobRecord, 0, len(jobs))
	for _, j := range jobs {
		recs = append(recs, *j)
	}
	n := &Node{cfg: cfg, store: st, renterJobs: heldJobs(b, recs, nil)}
	h := metrics.Handler(n.metricsRegistry().reg)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if !strings.Contains(w.Body.String(), `gleaner_jobs{state="running"} 83`) || !strings.Contains(w.Body.String(), `gleaner_leases{state="ended"} 166`) {
		b.Fatalf("unexpected scrape:\n%s", w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}

func TestMetricsLeaseRecordState(t *testing.T) {
	rec, err := json.Marshal(providing.Record{Lease: []byte("lease bytes"), State: providing.LeaseLaunched, Updated: time.Now(), Voucher: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	bare, _ := json.Marshal([]byte("old lease bytes"))
	for raw, want := range map[string]providing.RecordState{
		string(rec):                      providing.LeaseLaunched,
		string(bare):                     providing.LeaseEnded,
		`{"state":"awarded","lease":""}`: providing.LeaseAwarded,
		`garbage`:                        providing.LeaseEnded,
	} {
		if got := providing.RecordState(leaseRecordState([]byte(raw))); got != want {
			t.Errorf("leaseRecordState(%s) = %q, want %q", raw, got, want)
		}
	}
}

// heldJobs is a renter's job manager holding recs and their logs in
// memory (renting.Jobs.Hold), over an empty node.db of its own: no
// market, no network.
func heldJobs(t testing.TB, recs []renting.JobRecord, logs map[string][]byte) *renting.Jobs {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := renting.New(renting.Deps{Bg: t.Context(), Store: st, Log: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	r.Hold(recs, logs)
	return r
}
