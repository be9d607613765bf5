package rpc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func startWS(t *testing.T, opts ...ServerOption) (*testServer, *httptest.Server) {
	t.Helper()
	ts := newTestServer(opts...)
	hs := httptest.NewServer(ts.Handler())
	t.Cleanup(hs.Close)
	return ts, hs
}

func dialWS(t *testing.T, hs *httptest.Server) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	ws, _, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + testToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

type wsMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
	Params struct {
		Subscription string          `json:"subscription"`
		Result       json.RawMessage `json:"result"`
		Done         bool            `json:"done"`
		Error        *Error          `json:"error"`
	} `json:"params"`
}

func roundTrip(t *testing.T, ws *websocket.Conn, req string) wsMsg {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(req)); err != nil {
		t.Fatal(err)
	}
	return readMsg(t, ws)
}

func readMsg(t *testing.T, ws *websocket.Conn) wsMsg {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var m wsMsg
	if err := ws.ReadJSON(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func subscribe(t *testing.T, ws *websocket.Conn, count int) string {
	t.Helper()
	m := roundTrip(t, ws, `{"jsonrpc":"2.0","id":1,"method":"test_events","params":{"count":`+itoa(count)+`}}`)
	if m.Error != nil {
		t.Fatalf("subscribe: %v", m.Error)
	}
	var id string
	if err := json.Unmarshal(m.Result, &id); err != nil || id == "" {
		t.Fatalf("subscription id %s: %v", m.Result, err)
	}
	return id
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestWSCallsAndBatches(t *testing.T) {
	_, hs := startWS(t)
	ws := dialWS(t, hs)
	if m := roundTrip(t, ws, `{"jsonrpc":"2.0","id":7,"method":"test_add","params":[2,5]}`); string(m.Result) != "7" || string(m.ID) != "7" {
		t.Fatalf("got %+v", m)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`[{"jsonrpc":"2.0","id":1,"method":"test_add","params":[1,1]},{"jsonrpc":"2.0","method":"test_count"}]`)); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, raw, err := ws.ReadMessage()
	if err != nil || string(raw) != `[{"jsonrpc":"2.0","id":1,"result":2}]` {
		t.Fatalf("batch reply %s, %v", raw, err)
	}
}

func TestWSSubscriptionDeliversEventsThenDone(t *testing.T) {
	_, hs := startWS(t)
	ws := dialWS(t, hs)
	id := subscribe(t, ws, 3)
	for want := 1; want <= 3; want++ {
		m := readMsg(t, ws)
		if m.Method != "subscription" || m.Params.Subscription != id || string(m.Params.Result) != `{"seq":`+itoa(want)+`}` {
			t.Fatalf("event %d: %+v", want, m)
		}
	}
	if m := readMsg(t, ws); !m.Params.Done || m.Params.Subscription != id || m.Params.Error != nil {
		t.Fatalf("want done notification, got %+v", m)
	}
	// The slot is released: unsubscribing the finished subscription reports false.
	if m := roundTrip(t, ws, `{"jsonrpc":"2.0","id":2,"method":"unsubscribe","params":["`+id+`"]}`); string(m.Result) != "false" {
		t.Fatalf("unsubscribe after done: %+v", m)
	}
}

func TestWSUnsubscribeStopsEventsAndCancelsCtx(t *testing.T) {
	ts, hs := startWS(t)
	ws := dialWS(t, hs)
	id := subscribe(t, ws, 0)
	ts.subStream <- event{Seq: 41}
	if m := readMsg(t, ws); string(m.Params.Result) != `{"seq":41}` {
		t.Fatalf("got %+v", m)
	}
	if m := roundTrip(t, ws, `{"jsonrpc":"2.0","id":2,"method":"unsubscribe","params":["`+id+`"]}`); string(m.Result) != "true" {
		t.Fatalf("unsubscribe: %+v", m)
	}
	select {
	case <-ts.subEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("handler ctx not cancelled by unsubscribe")
	}
	// No event may follow: the next message is the reply to this call.
	if m := roundTrip(t, ws, `{"jsonrpc":"2.0","id":3,"method":"test_add","params":[1,2]}`); string(m.ID) != "3" {
		t.Fatalf("got %+v after unsubscribe", m)
	}
}

func TestWSCloseCancelsSubscriptionCtx(t *testing.T) {
	ts, hs := startWS(t)
	ws := dialWS(t, hs)
	subscribe(t, ws, 0)
	subscribe(t, ws, 0)
	ws.Close()
	for range 2 {
		select {
		case <-ts.subEnded:
		case <-time.After(5 * time.Second):
			t.Fatal("handler ctx not cancelled by connection close")
		}
	}
}

func TestWSSubscriptionLimit(t *testing.T) {
	_, hs := startWS(t)
	ws := dialWS(t, hs)
	for range maxSubscriptions {
		subscribe(t, ws, 0)
	}
	m := roundTrip(t, ws, `{"jsonrpc":"2.0","id":9,"method":"test_events","params":{"count":0}}`)
	if m.Error == nil || m.Error.Code != CodeTooManySubscriptions {
		t.Fatalf("33rd subscription: %+v", m)
	}
}

func TestWSUpgradeNeedsToken(t *testing.T) {
	_, hs := startWS(t)
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	for _, hdr := range []http.Header{nil, {"Authorization": {"Bearer nope"}}} {
		_, resp, err := websocket.DefaultDialer.Dial(url, hdr)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("dial with %v: resp %v err %v", hdr, resp, err)
		}
		var m wsMsg
		if json.NewDecoder(resp.Body).Decode(&m) != nil || m.Error == nil || m.Error.Code != CodeUnauthorized {
			t.Fatalf("401 body: %+v", m)
		}
	}
}

func TestWSReadLimit(t *testing.T) {
	_, hs := startWS(t)
	ws := dialWS(t, hs)
	ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"test_echo","params":{"text":"`+strings.Repeat("x", 2000)+`"}}`))
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("oversize message: want close 1009, got %v", err)
	}
}

// TestPumpEndsSlowSubscriber drives pump directly with a connection whose
// writer is stalled: after SubscriptionQueue events are queued the next one
// ends the subscription with CodeSlowSubscriber, before any queued event.
func TestPumpEndsSlowSubscriber(t *testing.T) {
	srv := NewServer("t", SubscriptionQueue(4))
	c := &wsConn{srv: srv, out: make(chan []byte), subs: map[string]*subscription{}}
	c.ctx, c.cancel = t.Context(), func() {}
	sub, e := c.newSubscription()
	if e != nil {
		t.Fatal(e)
	}
	events := make(chan int, 10)
	for i := range 10 {
		events <- i
	}
	done := make(chan struct{})
	go func() { pump(sub, events); close(done) }()
	// Read nothing until the pump has taken 4 queued + 1 overflowing event.
	for len(events) > 5 {
		time.Sleep(time.Millisecond)
	}
	var m wsMsg
	if err := json.Unmarshal(<-c.out, &m); err != nil {
		t.Fatal(err)
	}
	if !m.Params.Done || m.Params.Error == nil || m.Params.Error.Code != CodeSlowSubscriber {
		t.Fatalf("want slow-subscriber end, got %+v", m)
	}
	<-done
}
