package rpc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// TestSlowBodyIsCut: an authenticated client sends its headers and half
// the body it announced, then stalls. The server must answer 408 and close
// within the body deadline instead of waiting for ever.
func TestSlowBodyIsCut(t *testing.T) {
	ts, hs := startWS(t, BodyTimeout(200*time.Millisecond))
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"test_count"}`
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		testToken, len(body), body[:len(body)/2])
	start := time.Now()
	conn.SetReadDeadline(start.Add(3 * time.Second)) // the test's own limit
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body after %v: %v", time.Since(start), err)
	}
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(msg), "request body not received within 200ms") {
		t.Errorf("status %d, body %s", resp.StatusCode, msg)
	}
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection not closed after the 408: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if n := ts.invoked.Load(); n != 0 {
		t.Errorf("%d handlers ran", n)
	}
}

// TestSlowCallOutlivesBodyTimeout: the body deadline must be gone once the
// body is in, or net/http's background read of the connection would fail
// at it and cancel the request's context, and with it any call slower than
// the deadline. net/http clears it when the body hits EOF; this guards the
// server's reliance on that.
func TestSlowCallOutlivesBodyTimeout(t *testing.T) {
	ts := newTestServer(BodyTimeout(100 * time.Millisecond))
	Register(ts.Server, "test_slow", MethodDoc{}, func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-time.After(400 * time.Millisecond):
			return "done", nil
		case <-ctx.Done():
			return "", fmt.Errorf("cancelled after the body was in: %w", ctx.Err())
		}
	})
	hs := httptest.NewServer(ts.Handler())
	defer hs.Close()
	var res string
	if err := NewClient(hs.URL, testToken).Call(t.Context(), "test_slow", nil, &res); err != nil || res != "done" {
		t.Fatalf("slow call: %q, %v", res, err)
	}
}

// TestKeepAliveAfterReplyTimeout: the reply's write deadline must not
// outlive the reply: a second call arriving after it on the same kept-alive
// connection must still get its answer. net/http clears the deadline after
// each reply; this guards the server's reliance on that.
func TestKeepAliveAfterReplyTimeout(t *testing.T) {
	_, hs := startWS(t, ReplyTimeout(100*time.Millisecond))
	c := NewClient(hs.URL, testToken)
	var reused []bool
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
	})
	for i := range 2 {
		if err := c.Call(ctx, "test_count", nil, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if len(reused) != 2 || !reused[1] {
		t.Fatalf("second call did not reuse the connection (%v): the test proves nothing", reused)
	}
}

// TestStalledReaderIsCut: a client that sends a call and then never reads
// the reply must not pin the handler (and the reply buffer) for ever.
func TestStalledReaderIsCut(t *testing.T) {
	ts := newTestServer(ReplyTimeout(200 * time.Millisecond))
	big := strings.Repeat("x", 8<<20) // beyond loopback socket buffers (4 MiB send, 4 KiB receive)
	Register(ts.Server, "test_big", MethodDoc{}, func(context.Context, struct{}) (string, error) { return big, nil })
	done := make(chan struct{}, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.Handler().ServeHTTP(w, r)
		done <- struct{}{}
	}))
	defer hs.Close()
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	body := `{"jsonrpc":"2.0","id":1,"method":"test_big"}`
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", testToken, len(body), body)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("handler still writing to a client that stopped reading")
	}
}

// TestWSOutlivesHTTPDeadlines: the POST deadlines must not leak onto
// WebSocket connections, which live long and go quiet between calls.
func TestWSOutlivesHTTPDeadlines(t *testing.T) {
	_, hs := startWS(t, BodyTimeout(50*time.Millisecond), ReplyTimeout(50*time.Millisecond))
	ws := dialWS(t, hs)
	time.Sleep(250 * time.Millisecond)
	if m := roundTrip(t, ws, `{"jsonrpc":"2.0","id":1,"method":"test_count"}`); m.Error != nil || string(m.Result) != "1" {
		t.Fatalf("call after a quiet spell: %+v", m)
	}
}
