package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"
)

func TestClientCall(t *testing.T) {
	_, hs := startWS(t)
	c := NewClient(hs.URL, testToken)
	ctx := t.Context()

	var sum int
	if err := c.Call(ctx, "test_add", addParams{A: 2, B: 40}, &sum); err != nil || sum != 42 {
		t.Fatalf("test_add: %d, %v", sum, err)
	}
	if err := c.Call(ctx, "test_add", []int{1, 2}, &sum); err != nil || sum != 3 {
		t.Fatalf("positional test_add: %d, %v", sum, err)
	}
	raw, err := c.CallRaw(ctx, "test_echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil || string(raw) != `{"text":"hi"}` {
		t.Fatalf("CallRaw: %s, %v", raw, err)
	}
}

func TestClientErrorPropagation(t *testing.T) {
	_, hs := startWS(t)
	ctx := t.Context()
	var e *Error
	err := NewClient(hs.URL, testToken).Call(ctx, "test_fail", nil, nil)
	if !errors.As(err, &e) || e.Code != -32010 || e.Message != "insufficient balance" {
		t.Fatalf("app error: %v", err)
	}
	err = NewClient(hs.URL, testToken).Call(ctx, "nope", nil, nil)
	if !errors.As(err, &e) || e.Code != CodeMethodNotFound {
		t.Fatalf("unknown method: %v", err)
	}
	err = NewClient(hs.URL, "wrong").Call(ctx, "test_count", nil, nil)
	if !errors.As(err, &e) || e.Code != CodeUnauthorized {
		t.Fatalf("wrong token: %v", err)
	}
	if errors.Is(err, ErrUnreachable) {
		t.Fatal("401 must not look unreachable")
	}
}

func TestClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens here now: connection refused
	c := NewClient(url, testToken)
	if err := c.Call(t.Context(), "test_count", nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Call: want ErrUnreachable, got %v", err)
	}
	if _, err := c.Subscribe(t.Context(), "test_events", nil); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Subscribe: want ErrUnreachable, got %v", err)
	}
}

func TestClientSubscribe(t *testing.T) {
	ts, hs := startWS(t)
	c := NewClient(hs.URL, testToken)
	ch, err := c.Subscribe(t.Context(), "test_events", eventParams{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range ch { // closes on the server's done notification
		got = append(got, string(ev))
	}
	if len(got) != 3 || got[2] != `{"seq":3}` {
		t.Fatalf("events %q", got)
	}

	// Cancelling ctx closes the channel and ends the handler on the server.
	ctx, cancel := context.WithCancel(t.Context())
	ch, err = c.Subscribe(ctx, "test_events", eventParams{})
	if err != nil {
		t.Fatal(err)
	}
	ts.subStream <- event{Seq: 9}
	if ev := <-ch; string(ev) != `{"seq":9}` {
		t.Fatalf("streamed event %s", ev)
	}
	cancel()
	select {
	case <-ts.subEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("server handler not cancelled after client ctx cancel")
	}
	for range ch {
	}

	var e *Error
	if _, err := NewClient(hs.URL, "wrong").Subscribe(t.Context(), "test_events", nil); !errors.As(err, &e) || e.Code != CodeUnauthorized {
		t.Fatalf("Subscribe with wrong token: %v", err)
	}
	if _, err := c.Subscribe(t.Context(), "test_add", nil); err == nil {
		t.Fatal("Subscribe to a plain method must fail (result is not an id)")
	}
	if _, err := c.Subscribe(t.Context(), "test_events", map[string]any{"count": "x"}); !errors.As(err, &e) || e.Code != CodeInvalidParams {
		t.Fatalf("Subscribe with bad params: %v", err)
	}
}
