package metrics

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMetricsCollectorReportsSnapshot(t *testing.T) {
	reg := NewRegistry("1.2.3", "local")
	reg.MustRegister(NewCollector(func(s *Snapshot) {
		s.Peers = 3
		s.Jobs = map[string]int{"running": 2, "failed": 0}
		s.HasData, s.DataUsedBytes, s.DataQuota = true, 10, 1<<30
	}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	for key, v := range map[string]float64{
		"gleaner_peers": 3, "gleaner_jobs,state=running": 2, "gleaner_jobs,state=failed": 0,
		"gleaner_data_store_bytes,kind=used": 10, "gleaner_data_store_bytes,kind=quota": 1 << 30,
		"gleaner_build_info,go_version=" + runtime.Version() + ",network=local,version=1.2.3": 1,
	} {
		if g, ok := got[key]; !ok || g != v {
			t.Errorf("%s = %v (%v), want %v", key, g, ok, v)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "gleaner_gpu_") || strings.HasPrefix(key, "gleaner_earned") {
			t.Errorf("%s reported for a part not read", key)
		}
	}
}

func TestMetricsServerServesOnlyMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, NewRegistry("1.2.3", "local"), nil)
	defer s.Shutdown(context.Background())
	for path, code := range map[string]int{"/metrics": 200, "/": 404, "/debug/pprof/": 404} {
		resp, err := http.Get(strings.TrimSuffix(s.URL(), "/metrics") + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, code)
		}
	}
}

func TestMetricsTrafficAreCounters(t *testing.T) {
	reg := NewRegistry("1.2.3", "local")
	reg.MustRegister(NewCollector(func(s *Snapshot) {
		s.StreamBytes = map[StreamKey]uint64{{Protocol: "/gleaner/local/job/1", Direction: "in"}: 7}
		s.GossipMessages = map[GossipKey]uint64{{Topic: "/gleaner/local/ledger/1", Event: "rejected"}: 2}
	}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if m.Counter != nil {
				got[f.GetName()] += m.GetCounter().GetValue()
			}
		}
	}
	if got["gleaner_p2p_stream_bytes_total"] != 7 || got["gleaner_gossip_messages_total"] != 2 {
		t.Errorf("counters %v", got)
	}
}

func TestMetricsCallsLabels(t *testing.T) {
	reg := NewRegistry("1.2.3", "local")
	c := NewCalls(reg)
	c.RPC("node_info", time.Millisecond, 0)
	c.RPC("", time.Millisecond, -32601)
	c.RPC("job_status", time.Millisecond, -32021)
	c.Auction(2*time.Second, AuctionNoMatch)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = true
		}
	}
	for _, key := range []string{
		"gleaner_rpc_call_duration_seconds,method=node_info",
		"gleaner_rpc_call_duration_seconds,method=unknown",
		"gleaner_rpc_call_errors_total,class=method_not_found,method=unknown",
		"gleaner_rpc_call_errors_total,class=application,method=job_status",
		"gleaner_auction_duration_seconds,outcome=no-match",
	} {
		if !got[key] {
			t.Errorf("no %s", key)
		}
	}
	if got["gleaner_rpc_call_errors_total,class=application,method=node_info"] {
		t.Error("an error for a result")
	}
	for code, want := range map[int]string{-32700: "parse_error", -32602: "invalid_params", -32603: "internal_error",
		-32001: "rpc", -32005: "rpc", -32010: "application", -32043: "application", 1: "application"} {
		if g := ErrorClass(code); g != want {
			t.Errorf("ErrorClass(%d) = %q, want %q", code, g, want)
		}
	}
}

// GPU faults are counters by kind, every kind present.
func TestMetricsGPUFaultsAreCounters(t *testing.T) {
	reg := NewRegistry("1.2.3", "local")
	reg.MustRegister(NewCollector(func(s *Snapshot) {
		s.GPUFaults = map[string]uint64{"xid": 2, "ecc": 0}
	}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "gleaner_gpu_faults_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.Counter == nil {
				t.Fatalf("%s is not a counter", f.GetName())
			}
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if len(got) != 2 || got["xid"] != 2 || got["ecc"] != 0 {
		t.Errorf("gleaner_gpu_faults_total = %v, want xid 2, ecc 0", got)
	}
}
