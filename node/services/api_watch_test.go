package services

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// serviceRPC serves the service API of a renter with one service "svc"
// (replicas r0 and r1, a gateway without a listener) over HTTP and
// WebSocket; no Docker, no network beyond loopback.
func serviceRPC(t *testing.T) (*rpc.Client, *Manager) {
	t.Helper()
	up := time.Now().UTC()
	s := costServices(t, up, []string{"r0", "r1"}, map[string][]byte{"r0": []byte("loading\nready\n")},
		&renting.JobRecord{ID: "r0", Service: "svc", Created: up, State: renting.StateRunning, LeaseCID: "A", Paid: 1_000_000},
		&renting.JobRecord{ID: "r1", Service: "svc", Created: up, State: renting.StateRunning, LeaseCID: "B"})
	gw := gateway.New(gateway.Config{Service: "svc", Cost: s.serviceCost(s.recs["svc"])})
	t.Cleanup(func() { gw.Close() })
	s.live["svc"] = &liveService{gw: gw, url: "http://127.0.0.1:1"}
	srv := rpc.NewServer("tok")
	RegisterAPI(srv, func() *Manager { return s })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return rpc.NewClient(ts.URL, "tok"), s
}

func rpcCode(err error) int {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func TestServiceLogsRPC(t *testing.T) {
	c, _ := serviceRPC(t)
	ctx := context.Background()
	var res ServiceLogsResult
	if err := c.Call(ctx, "service_logs", map[string]any{"name": "svc"}, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Replicas) != 2 || res.Replicas[0].Logs != "loading\nready\n" || res.Replicas[1].Index != 1 || res.Replicas[1].Job != "r1" {
		t.Fatalf("service_logs: %+v", res)
	}
	if err := c.Call(ctx, "service_logs", map[string]any{"name": "svc", "replica": 1}, &res); err != nil || len(res.Replicas) != 1 || res.Replicas[0].Job != "r1" {
		t.Fatalf("service_logs replica 1: %+v, %v", res, err)
	}
	for _, bad := range []struct {
		params map[string]any
		code   int
	}{
		{map[string]any{"name": "nope"}, CodeNoSuchService},
		{map[string]any{"name": "svc", "replica": 2}, rpc.CodeInvalidParams},
		{map[string]any{"name": "svc", "replica": -1}, rpc.CodeInvalidParams},
		{map[string]any{}, rpc.CodeInvalidParams},
	} {
		err := c.Call(ctx, "service_logs", bad.params, &res)
		if rpcCode(err) != bad.code {
			t.Errorf("service_logs %v: %v, want code %d", bad.params, err, bad.code)
		}
	}
}

func TestServiceWatchRPC(t *testing.T) {
	c, s := serviceRPC(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Subscribe(ctx, "service_watch", ServiceNameParams{Name: "nope"}); rpcCode(err) != CodeNoSuchService {
		t.Fatalf("service_watch of no service: %v, want code %d", err, CodeNoSuchService)
	}
	if _, err := c.Subscribe(ctx, "service_watch", ServiceNameParams{}); rpcCode(err) != rpc.CodeInvalidParams {
		t.Fatalf("service_watch without a name: %v, want invalid params", err)
	}
	events, err := c.Subscribe(ctx, "service_watch", ServiceNameParams{Name: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the first at once, the next a second later
		raw, ok := <-events
		if !ok {
			t.Fatalf("watch ended after %d views", i)
		}
		var v ServiceView
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if v.Name != "svc" || v.Stats == nil || v.Stats.Spent != 1_000_000 || len(v.Replicas) != 2 {
			t.Fatalf("view %d: %+v", i, v)
		}
	}
	// The service goes down: the watch ends.
	s.mu.Lock()
	delete(s.recs, "svc")
	s.mu.Unlock()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch did not end once the service was down")
		}
	}
}

// A reader that does not take the views holds one, the latest.
func TestWatchServiceKeepsOnlyTheLatest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan ServiceView, 1)
	n := 0
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		watchService(ctx, out, time.Millisecond, func() (*ServiceView, error) {
			n++
			if n == 50 {
				close(done)
			}
			return &ServiceView{Port: n}, nil
		})
	}()
	<-done
	time.Sleep(20 * time.Millisecond)
	cancel()
	// Read once the watch has ended: a reader taking views while it runs
	// would make room for another, rightly.
	<-ended
	var last ServiceView
	got := 0
	for v := range out {
		last, got = v, got+1
	}
	if got > 1 || last.Port < 50 {
		t.Fatalf("%d views kept, last %d; want at most 1, of 50 or later", got, last.Port)
	}
}
