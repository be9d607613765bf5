package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// event is one server-sent event's data and when it arrived.
type event struct {
	data string
	at   time.Duration
}

// readEvents reads resp's events as they arrive, stopping after max.
func readEvents(t *testing.T, resp *http.Response, t0 time.Time, max int) []event {
	t.Helper()
	var evs []event
	br := bufio.NewReader(resp.Body)
	for len(evs) < max {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue // the blank line that ends an event
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		evs = append(evs, event{data, time.Since(t0)})
	}
	return evs
}

// TestStreamArrivesTokenByToken: each token is its own chunk, sent when it
// is made: the first arrives long before the last token's delay has
// elapsed (a server that buffered would deliver it with the last), and
// chunk k never arrives before ttft + k delays. Then usage, then [DONE].
func TestStreamArrivesTokenByToken(t *testing.T) {
	cfg := defaults(t)
	cfg.TTFT, cfg.TokenDelay = 50*time.Millisecond, 150*time.Millisecond
	ts := start(t, cfg)
	const n = 6
	t0 := time.Now()
	resp := post(t, ts.URL, `{"model":"gleaner-test-model","prompt":"a b c","max_tokens":6,"stream":true}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readEvents(t, resp, t0, n+10)
	if len(evs) != n+2 || evs[n+1].data != "[DONE]" {
		t.Fatalf("got %d events, want %d token chunks, usage and [DONE]: %v", len(evs), n, evs)
	}
	lastDue := cfg.TTFT + (n-1)*cfg.TokenDelay
	if evs[0].at >= lastDue-cfg.TokenDelay {
		t.Fatalf("first chunk arrived at %v, the last token was due at %v: buffered, not streamed", evs[0].at, lastDue)
	}
	var text strings.Builder
	for k, ev := range evs[:n] {
		if due := cfg.TTFT + time.Duration(k)*cfg.TokenDelay; ev.at < due {
			t.Errorf("chunk %d arrived at %v, before it was due at %v", k, ev.at, due)
		}
		var c completion
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatal(err)
		}
		if c.Object != "text_completion" || len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("chunk %d: %s", k, ev.data)
		}
		if fr := c.Choices[0].FinishReason; (k == n-1) != (fr != nil) || (fr != nil && *fr != "length") {
			t.Fatalf("chunk %d finish_reason: %s", k, ev.data)
		}
		text.WriteString(c.Choices[0].Text)
	}
	if text.String() != "tok0 tok1 tok2 tok3 tok4 tok5" {
		t.Fatalf("chunks join to %q", text.String())
	}
	var u completion
	if err := json.Unmarshal([]byte(evs[n].data), &u); err != nil {
		t.Fatal(err)
	}
	if len(u.Choices) != 0 || u.Usage == nil || *u.Usage != (usage{3, n, 3 + n}) {
		t.Fatalf("usage chunk: %s", evs[n].data)
	}
}

// TestEndlessKnob: -test-endless streams past max_tokens, and sends a
// non-streamed body with no end, until the client goes away; ts.Close
// (which waits for handlers) then proves the handlers stopped.
func TestEndlessKnob(t *testing.T) {
	cfg := defaults(t)
	cfg.Endless = true
	ts := start(t, cfg)
	t0 := time.Now()
	resp := post(t, ts.URL, `{"model":"gleaner-test-model","max_tokens":2,"stream":true}`)
	if evs := readEvents(t, resp, t0, 500); len(evs) != 500 || evs[499].data == "[DONE]" {
		t.Fatalf("endless stream ended after %d events", len(evs))
	}
	resp.Body.Close()
	resp = post(t, ts.URL, `{"model":"gleaner-test-model","max_tokens":2}`)
	const want = 8 << 20
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, want))
	if err != nil || n != want {
		t.Fatalf("endless body: read %d bytes, %v", n, err)
	}
	resp.Body.Close()
	done := make(chan struct{})
	go func() { ts.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the endless handlers did not stop after their clients went away")
	}
}

// TestGracefulShutdown: cancelling run's context (SIGTERM in main) lets a
// request in flight finish, then run returns nil.
func TestGracefulShutdown(t *testing.T) {
	cfg := defaults(t)
	cfg.TTFT = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	accepted := make(chan struct{}, 1)
	go func() { ran <- run(ctx, cfg, acceptSignal{ln, accepted}) }()
	url := "http://" + ln.Addr().String()
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"gleaner-test-model","max_tokens":1}`))
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	// Shut down once the server holds the connection: one still in the
	// kernel's backlog would be reset as the listener closes.
	<-accepted
	time.Sleep(50 * time.Millisecond) // the request is in its ttft
	cancel()
	resp := <-got
	if resp == nil {
		t.FailNow()
	}
	var c completion
	decodeAs(t, resp, http.StatusOK, &c)
	resp.Body.Close()
	if c.Usage == nil || c.Usage.CompletionTokens != 1 {
		t.Fatalf("in-flight request: %+v", c)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(shutdownGrace + 2*time.Second):
		t.Fatal("run did not return after shutdown")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

// acceptSignal is a listener that says on c when it has accepted a
// connection.
type acceptSignal struct {
	net.Listener
	c chan<- struct{}
}

func (l acceptSignal) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.c <- struct{}{}:
		default:
		}
	}
	return conn, err
}
