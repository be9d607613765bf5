package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// fakeSub is a fakeCaller that also subscribes: job_follow yields events.
type fakeSub struct {
	*fakeCaller
	events []any
	params any
}

func (f *fakeSub) Subscribe(ctx context.Context, method string, params any) (<-chan json.RawMessage, error) {
	if method != "job_follow" {
		return nil, &rpc.Error{Code: rpc.CodeMethodNotFound, Message: "method not found: " + method}
	}
	f.params = params
	ch := make(chan json.RawMessage, len(f.events))
	for _, e := range f.events {
		b, _ := json.Marshal(e)
		ch <- b
	}
	close(ch)
	return ch, nil
}

func TestConsoleFollowRefused(t *testing.T) {
	c := testConsole(t, &fakeCaller{}, nil)
	ck, _ := login(t, c)
	up := func(r *http.Request) {
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	}
	for _, tc := range []struct {
		name string
		edit func(*http.Request)
	}{
		{"no session", func(r *http.Request) { up(r); r.Header.Set("Origin", "http://127.0.0.1:4031") }},
		{"wrong cookie", func(r *http.Request) {
			up(r)
			r.Header.Set("Origin", "http://127.0.0.1:4031")
			r.AddCookie(&http.Cookie{Name: cookieName, Value: "guess"})
		}},
		{"cross-site Origin", func(r *http.Request) { up(r); r.AddCookie(ck); r.Header.Set("Origin", "http://evil.example") }},
		{"other port", func(r *http.Request) { up(r); r.AddCookie(ck); r.Header.Set("Origin", "http://127.0.0.1:9999") }},
		{"no Origin", func(r *http.Request) { up(r); r.AddCookie(ck) }},
	} {
		w := do(c, "GET", "/ui/jobs/j1/follow", nil, tc.edit)
		if w.Code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", tc.name, w.Code, w.Body)
		}
	}
	// With both, but a caller that cannot subscribe: 501, not a crash.
	w := do(c, "GET", "/ui/jobs/j1/follow", nil, func(r *http.Request) { up(r); r.AddCookie(ck); r.Header.Set("Origin", "http://127.0.0.1:4031") })
	if w.Code != http.StatusNotImplemented {
		t.Errorf("a caller without Subscribe: %d %s", w.Code, w.Body)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'; connect-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
}

// TestConsoleFollowRelays: a WebSocket with the session and this
// console's Origin gets the job's events, each log cut to the bound.
func TestConsoleFollowRelays(t *testing.T) {
	big := strings.Repeat("x", followMaxLog+100)
	f := &fakeSub{fakeCaller: &fakeCaller{}, events: []any{
		map[string]any{"job_id": "j1", "type": "state", "state": "running", "time": t0},
		map[string]any{"job_id": "j1", "type": "log", "log": "line 1\n", "time": t0},
		map[string]any{"job_id": "j1", "type": "log", "log": big, "time": t0},
		map[string]any{"job_id": "j1", "type": "state", "state": "completed", "time": t0},
	}}
	f.results = map[string]any{"job_status": jobRecord{ID: "j1", State: "completed"}}
	c := testConsole(t, f.fakeCaller, func(o *Options) { o.Caller = f; o.AllowRemote = true })
	srv := httptest.NewServer(c)
	defer srv.Close()
	ck, _ := login(t, c)
	follow := func() []liveEvent {
		h := http.Header{"Origin": {srv.URL}, "Cookie": {ck.Name + "=" + ck.Value}}
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ui/jobs/j1/follow", h)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		var got []liveEvent
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			var ev liveEvent
			if err := ws.ReadJSON(&ev); err != nil {
				return got
			}
			got = append(got, ev)
		}
	}
	got := follow()
	if len(got) != 5 || got[0].State != "running" || got[1].Log != "line 1\n" || got[3].State != "completed" || got[4].Type != "end" || got[4].State != "completed" {
		t.Fatalf("relayed %+v", got)
	}
	if n := len(got[2].Log); n > followMaxLog+10 || !strings.HasSuffix(got[2].Log, "…\n") {
		t.Errorf("a %d-byte log event was relayed as %d bytes", len(big), n)
	}
	if p, _ := f.params.(map[string]string); p["id"] != "j1" {
		t.Errorf("job_follow params %v", f.params)
	}
	// A stream that ends before the job does is not the job's end.
	f.events = f.events[:2]
	f.results["job_status"] = jobRecord{ID: "j1", State: "running"}
	if got := follow(); len(got) != 3 || got[2].Type != "dropped" {
		t.Errorf("a stream cut short: %+v", got)
	}
}

// TestInProcessSubscribe runs a subscription through a real RPC server's
// WebSocket handler, over the in-memory connection.
func TestInProcessSubscribe(t *testing.T) {
	s := rpc.NewServer("tok")
	type p struct {
		ID string `json:"id"`
	}
	rpc.RegisterSubscription(s, "job_follow", rpc.MethodDoc{ParamNames: []string{"id"}}, func(ctx context.Context, q p) (<-chan map[string]string, error) {
		if q.ID != "j1" {
			return nil, &rpc.Error{Code: -32020, Message: "no job " + q.ID}
		}
		ch := make(chan map[string]string, 3)
		ch <- map[string]string{"type": "log", "log": "a\n"}
		ch <- map[string]string{"type": "log", "log": "b\n"}
		close(ch)
		return ch, nil
	})
	sub := InProcess(s.Handler(), "tok").(Subscriber)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := sub.Subscribe(ctx, "job_follow", map[string]string{"id": "j1"})
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for raw := range ch {
		var ev liveEvent
		json.Unmarshal(raw, &ev)
		logs = append(logs, ev.Log)
	}
	if strings.Join(logs, "") != "a\nb\n" {
		t.Errorf("events %q", logs)
	}
	if _, err := sub.Subscribe(ctx, "job_follow", map[string]string{"id": "nope"}); err == nil || !strings.Contains(err.Error(), "no job nope") {
		t.Errorf("a refused subscription: %v", err)
	}
	if _, err := InProcess(s.Handler(), "wrong").(Subscriber).Subscribe(ctx, "job_follow", map[string]string{"id": "j1"}); err == nil {
		t.Error("a wrong token subscribed")
	}
}

func TestConsoleJobPageLogs(t *testing.T) {
	long := ""
	for i := 0; i < 300; i++ {
		long += "line " + string(rune('a'+i%26)) + "\n"
	}
	f := &fakeCaller{results: map[string]any{
		"job_status":  jobRecord{ID: "j1", Name: "train", State: "running"},
		"job_explain": jobExplain{},
		"job_logs":    jobLogs{Logs: long + "<script>alert(1)</script>\n"},
	}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/jobs/j1", nil, withCookie(ck))
	body := w.Body.String()
	mustContain(t, body, `data-follow="/ui/jobs/j1/follow"`, `<script src="/ui/static/live.js" defer></script>`, "&lt;script&gt;alert(1)", "The last lines only")
	if strings.Count(body, "\nline ") > logTailLines {
		t.Errorf("more than %d lines rendered", logTailLines)
	}
	f.results["job_status"] = jobRecord{ID: "j1", Name: "train", State: "completed"}
	delete(f.results, "job_logs")
	w = do(c, "GET", "/ui/jobs/j1", nil, withCookie(ck))
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "<script") || strings.Contains(w.Body.String(), "data-follow") {
		t.Errorf("an ended job's page: %d, still follows:\n%s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(), `id="logs-error"`)
	js := do(c, "GET", "/ui/static/live.js", nil, nil)
	if js.Code != http.StatusOK || !strings.Contains(js.Body.String(), "WebSocket") {
		t.Errorf("live.js: %d", js.Code)
	}
}

func syntheticService() serviceView {
	return serviceView{Name: "chat", URL: "http://127.0.0.1:8100", Gateway: "up", Port: 8100, Created: t0,
		Replicas: []serviceReplica{{Index: 0, Job: "job-a", State: "running", Provider: "12D3KooWProviderA", Ready: true}, {Index: 1, Job: "job-b", State: "pulling"}},
		Stats: &serviceStats{Window: time.Minute,
			Figures: gateway.Figures{Requests: 1200, Errors: 3, QPS: 20, LatencyP50: 12 * time.Millisecond, LatencyP95: 40 * time.Millisecond, LatencyP99: 90 * time.Millisecond,
				Spent: 2_500_000, PerKRequests: 2_083_333, PerMTokens: 1_500_000, Tokens: 1_666_666},
			Replicas: []gateway.ReplicaStats{{ID: "job-a", Ready: true, Figures: gateway.Figures{Requests: 1203, Errors: 3, QPS: 20, LatencyP50: 11 * time.Millisecond, PerKRequests: 2_077_000, PerMTokens: 1_490_000}}}}}
}

func TestConsoleServicesPages(t *testing.T) {
	sv := syntheticService()
	f := &fakeCaller{results: map[string]any{"service_list": []serviceView{}, "service_status": sv}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/services", nil, withCookie(ck))
	mustContain(t, w.Body.String(), "No services", `href="/ui/services" aria-current="page"`)
	list := sv
	list.Stats = nil
	f.results["service_list"] = []serviceView{list}
	w = do(c, "GET", "/ui/services", nil, withCookie(ck))
	mustContain(t, w.Body.String(), `href="/ui/services/chat"`, "1 of 2", "http://127.0.0.1:8100")
	w = do(c, "GET", "/ui/services/chat", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("service page: %d %s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(), "20.00 req/s", "p50 12.0 ms, p95 40.0 ms, p99 90.0 ms", "1200 (3 error(s)",
		auction.FormatCredits(2_083_333)+" credits/1k requests", auction.FormatCredits(1_500_000)+" credits/1M tokens",
		`href="/ui/jobs/job-a"`, "ready", "not ready", "3 of 1203", auction.FormatCredits(2_077_000)+" credits/1k requests")
	f.errs = map[string]error{"service_status": &rpc.Error{Code: -32023, Message: `no service "x"`}}
	w = do(c, "GET", "/ui/services/x", nil, withCookie(ck))
	mustContain(t, w.Body.String(), "no service &#34;x&#34;")
}

func TestConsoleSpendPage(t *testing.T) {
	f := &fakeCaller{results: map[string]any{
		"ledger_balance": balance{Faucet: 100_000_000, Spent: 3_250_000, Balance: 96_750_000},
		"ledger_spend": func(params any) (any, error) {
			if p := params.(map[string]int); p["days"] != 3 {
				t.Errorf("ledger_spend days %v", p)
			}
			return spendResult{From: t0.AddDate(0, 0, -2), To: t0, Spent: 3_250_000,
				ByName: []spendName{{Name: "train", Jobs: 2, Leases: 2, Spent: 3_250_000}},
				Days:   []spendDay{{Day: "2026-05-02", Spent: 0}, {Day: "2026-05-03", Spent: 1_000_000}, {Day: "2026-05-04", Spent: 2_250_000}},
				Leases: []spendLease{{Day: "2026-05-04", Name: "train", JobID: "job-1", Lease: "bafy1", Provider: "12D3KooWProv", Spent: 2_250_000, Source: "settlement"}}}, nil
		},
	}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/spend?days=3", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("spend: %d %s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(), auction.FormatCredits(3_250_000)+" credits from", auction.FormatCredits(96_750_000)+" credits (faucet",
		"<svg", "05-04: "+auction.FormatCredits(2_250_000)+" credits", `href="/ui/jobs/job-1"`, "settlement", `aria-current="page">Spend`)
}
