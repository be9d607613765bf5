package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// dropper reads the request and closes the connection unanswered: a
// replica that dies mid-request.
var dropper = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
})

func TestIdempotentRetriedPostNot(t *testing.T) {
	a, b := newBackend(t, dropper), newBackend(t, modelHandler())
	g, url := startGateway(t, Config{FailThreshold: 100}, a.replica("a", time.Millisecond), b.replica("b", 5*time.Millisecond))
	c := newClient(t)

	if code, rep, _ := get(t, c, url+"/v1/models"); code != 200 || rep != "b" {
		t.Fatalf("GET: %d from %q, want 200 from b after a dropped it", code, rep)
	}
	const completion = `{"model":"m","prompt":"hi","max_tokens":4}`
	code, _, body := post(t, c, url+"/v1/completions", completion)
	if code != http.StatusBadGateway || errorCode(t, body) != "replica_failed" {
		t.Fatalf("POST without Idempotency-Key: %d %s, want 502 replica_failed", code, body)
	}
	if b.hits.Load() != 1 {
		t.Fatalf("b saw %d requests, want 1 (the GET): the POST was retried", b.hits.Load())
	}
	if code, rep, _ := post(t, c, url+"/v1/completions", completion, "Idempotency-Key", "k1"); code != 200 || rep != "b" {
		t.Fatalf("POST with Idempotency-Key: %d from %q, want 200 from b", code, rep)
	}
	st := g.Stats()
	if st.Requests != 3 || st.Errors != 1 || st.Retries != 2 {
		t.Fatalf("service figures %+v", st.Figures)
	}
	if ra := replicaStats(t, g, "a"); ra.Requests != 3 || ra.Errors != 3 {
		t.Fatalf("a's figures %+v", ra.Figures)
	}
}

// A replica that refuses the dial never saw the request, so even a POST
// goes on to the next.
func TestDialFailureRetriedAndTakesReplicaOut(t *testing.T) {
	b := newBackend(t, modelHandler())
	dead := Replica{ID: "a", RTT: time.Millisecond, Ready: true, Dial: func(context.Context) (net.Conn, error) {
		return nil, errors.New("refused")
	}}
	g, url := startGateway(t, Config{FailThreshold: 2}, dead, b.replica("b", 5*time.Millisecond))
	c := newClient(t)
	for range 3 {
		if code, rep, _ := post(t, c, url+"/v1/completions", `{"prompt":"x"}`); code != 200 || rep != "b" {
			t.Fatalf("%d from %q", code, rep)
		}
	}
	if ra := replicaStats(t, g, "a"); ra.Ready || ra.Requests != 2 {
		t.Fatalf("a after 2 failed dials: %+v", ra)
	}
	g.SetReady("b", false)
	code, _, body := get(t, c, url+"/v1/models")
	if code != 503 || errorCode(t, body) != "no_ready_replica" {
		t.Fatalf("%d %s", code, body)
	}
	g.SetReady("a", true)
	code, _, body = get(t, c, url+"/v1/models")
	if code != 502 || errorCode(t, body) != "replica_unreachable" {
		t.Fatalf("%d %s", code, body)
	}
}

// 0 of N idempotent requests lost while a replica is killed under load.
func TestNoIdempotentRequestLostWhenReplicaKilled(t *testing.T) {
	var dying atomic.Bool
	ha := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dying.Load() {
			dropper(w, r)
			return
		}
		modelHandler().ServeHTTP(w, r)
	})
	a, b := newBackend(t, ha), newBackend(t, modelHandler())
	g, url := startGateway(t, Config{}, a.replica("a", time.Millisecond), b.replica("b", time.Millisecond))
	c := newClient(t)
	const n, workers, killAt = 800, 8, 200
	var done, failed atomic.Int64
	kill := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for range next {
				resp, err := c.Get(url + "/v1/models")
				if err != nil {
					failed.Add(1)
					continue
				}
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				}
				if done.Add(1) == killAt {
					once.Do(func() { close(kill) })
				}
			}
		})
	}
	<-kill
	dying.Store(true) // requests in a's handlers now die there
	a.srv.Listener.Close()
	a.srv.CloseClientConnections()
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d idempotent requests lost", failed.Load(), n)
	}
	// A client can have its answer's last byte a moment before the
	// gateway records it: wait (boundedly) for the last records.
	st := g.Stats()
	for deadline := time.Now().Add(5 * time.Second); (st.Requests != n || st.Outstanding != 0) && time.Now().Before(deadline); st = g.Stats() {
		time.Sleep(time.Millisecond) // polling the figures, not synchronising the proxy
	}
	if st.Requests != n || st.Errors != 0 || st.Retries == 0 {
		t.Fatalf("service figures %+v", st.Figures)
	}
	if replicaStats(t, g, "a").Ready {
		t.Fatal("a still ready after its dials failed")
	}
	t.Logf("%d requests, %d retried, a answered %d", n, st.Retries, a.hits.Load())
}

// The replica holds its second chunk until the client has read the
// first: a gateway that buffered would deadlock here.
func TestStreamingPassesChunksAsTheyCome(t *testing.T) {
	gotFirst := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"one\"}],\"usage\":null}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-gotFirst:
		case <-time.After(20 * time.Second): // a guard against a hang, not synchronisation
			_, _ = io.WriteString(w, "data: timeout\n\n")
			return
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n")
	})
	a := newBackend(t, h)
	g, url := startGateway(t, Config{}, a.replica("a", 0))
	resp, err := newClient(t).Post(url+"/v1/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, `"one"`) {
		t.Fatalf("first chunk %q %v", line, err)
	}
	close(gotFirst)
	rest, err := io.ReadAll(br)
	if err != nil || strings.Contains(string(rest), "timeout") || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("rest %q %v", rest, err)
	}
	if st := g.Stats(); st.Tokens != 3 || st.Errors != 0 {
		t.Fatalf("figures %+v", st.Figures)
	}
}

func TestEndlessResponseCutAtLimit(t *testing.T) {
	const limit = 256 << 10
	stopped := make(chan struct{})
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(stopped)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := []byte("data: " + strings.Repeat("tok ", 4096) + "\n\n")
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	a := newBackend(t, endless)
	g, url := startGateway(t, Config{MaxResponseBytes: limit}, a.replica("a", 0))
	resp, err := newClient(t).Get(url + "/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || n > limit {
		t.Fatalf("client read %d bytes, err %v: want an aborted response of at most %d", n, err, limit)
	}
	<-stopped // the replica's connection was cut too
	if st := g.Stats(); st.Errors != 1 || st.Replicas[0].Errors != 1 {
		t.Fatalf("figures %+v", st)
	}
}

func TestOversizedAnswerRefusedBeforeCommit(t *testing.T) {
	bigHeader := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("x", 64<<10))
		_, _ = w.Write([]byte("ok"))
	})
	bigLength := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1073741824")
		_, _ = w.Write([]byte("not that much"))
	})
	for name, h := range map[string]http.Handler{"headers": bigHeader, "content-length": bigLength} {
		t.Run(name, func(t *testing.T) {
			a := newBackend(t, h)
			g, url := startGateway(t, Config{MaxResponseHeaderBytes: 8 << 10, MaxResponseBytes: 1 << 20}, a.replica("a", 0))
			code, _, body := get(t, newClient(t), url+"/x")
			if code != http.StatusBadGateway || errorCode(t, body) != "replica_response_too_large" {
				t.Fatalf("%d %s", code, body)
			}
			if st := g.Stats(); st.Errors != 1 {
				t.Fatalf("figures %+v", st.Figures)
			}
		})
	}
}

func TestSilentReplicaCutByIdleTimeout(t *testing.T) {
	silent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	a := newBackend(t, silent)
	g, url := startGateway(t, Config{IdleTimeout: 50 * time.Millisecond}, a.replica("a", 0))
	resp, err := newClient(t).Get(url + "/s")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || string(b) != "data: first\n\n" {
		t.Fatalf("read %q, %v: want the first chunk then an abort", b, err)
	}
	if st := g.Stats(); st.Errors != 1 {
		t.Fatalf("figures %+v", st.Figures)
	}
}

func TestPortTakenSaysWhichAndWhatToDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	g := New(Config{})
	_, err = g.Listen(addr)
	var le *ListenError
	if !errors.As(err, &le) || !le.InUse {
		t.Fatalf("got %v, want a *ListenError with InUse", err)
	}
	for _, want := range []string{addr, "already in use", "port 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	got, err := g.Listen("127.0.0.1:0")
	if err != nil || got.(*net.TCPAddr).Port == 0 || g.Addr() != got {
		t.Fatalf("port 0: %v %v", got, err)
	}
	_ = g.Close()
}

func TestTokensAndCostFromUsage(t *testing.T) {
	a := newBackend(t, modelHandler())
	r := a.replica("a", 0)
	r.Cost = func() auction.Credits { return 500_000 }
	g, url := startGateway(t, Config{Cost: func() auction.Credits { return 1_000_000 }}, r)
	c := newClient(t)
	for range 3 { // 2 prompt + 16 completion tokens each
		if code, _, body := post(t, c, url+"/v1/completions", `{"prompt":"hello there"}`); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	for range 2 { // 1 + 8, streamed
		if code, _, body := post(t, c, url+"/v1/completions", `{"prompt":"hi","max_tokens":8,"stream":true}`); code != 200 || !strings.HasSuffix(body, "[DONE]\n\n") {
			t.Fatalf("%d %s", code, body)
		}
	}
	st := g.Stats()
	if st.PromptTokens != 3*2+2*1 || st.CompletionTokens != 3*16+2*8 || st.Tokens != 3*18+2*9 {
		t.Fatalf("tokens %d+%d=%d", st.PromptTokens, st.CompletionTokens, st.Tokens)
	}
	// 1 credit over 5 requests and 72 tokens, rounded down.
	if st.Spent != 1_000_000 || st.PerKRequests != 200_000_000 || st.PerMTokens != 1_000_000*1_000_000/72 {
		t.Fatalf("cost %d, per 1k requests %d, per 1M tokens %d", st.Spent, st.PerKRequests, st.PerMTokens)
	}
	if ra := st.Replicas[0]; ra.Tokens != 72 || ra.PerKRequests != 100_000_000 {
		t.Fatalf("replica %+v", ra)
	}
}

// Replicas come and go while requests flow; run with -race.
func TestReplicaSetSafeForConcurrentUse(t *testing.T) {
	a, b := newBackend(t, modelHandler()), newBackend(t, modelHandler())
	ra, rb := a.replica("a", time.Millisecond), b.replica("b", 2*time.Millisecond)
	g, url := startGateway(t, Config{}, ra, rb)
	c := newClient(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get(url + "/v1/models")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 && resp.StatusCode != 503 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	for i := range 200 {
		switch i % 5 {
		case 0:
			g.SetReplicas([]Replica{ra, rb})
		case 1:
			g.Remove("a")
		case 2:
			g.Add(ra)
		case 3:
			g.SetRTT("b", time.Duration(i)*time.Microsecond)
			g.SetReady("a", i%2 == 0)
		case 4:
			_ = g.Stats()
		}
	}
	close(stop)
	wg.Wait()
}

// A chunked answer that is not server-sent events (NDJSON, which the
// gateway scans for usage, and raw bytes, which it does not) reaches the
// client chunk by chunk too, still chunked: the replica holds its second
// chunk until the client has read the first.
func TestChunkedPassesAsItComes(t *testing.T) {
	for _, ct := range []string{"application/x-ndjson", "application/octet-stream"} {
		t.Run(ct, func(t *testing.T) {
			gotFirst := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", ct)
				_, _ = io.WriteString(w, "{\"n\":1}\n")
				w.(http.Flusher).Flush()
				select {
				case <-gotFirst:
				case <-time.After(20 * time.Second): // a guard against a hang, not synchronisation
					_, _ = io.WriteString(w, "timeout\n")
					return
				}
				_, _ = io.WriteString(w, "{\"n\":2,\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":3}}\n")
			})
			a := newBackend(t, h)
			g, url := startGateway(t, Config{}, a.replica("a", 0))
			resp, err := newClient(t).Get(url + "/v1/stream")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.ContentLength != -1 || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
				t.Fatalf("Content-Length %d, Transfer-Encoding %v: want chunked", resp.ContentLength, resp.TransferEncoding)
			}
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "{\"n\":1}\n" {
				t.Fatalf("first chunk %q %v", line, err)
			}
			close(gotFirst)
			rest, err := io.ReadAll(br)
			if err != nil || !strings.HasPrefix(string(rest), "{\"n\":2,") {
				t.Fatalf("rest %q %v", rest, err)
			}
			wantTok := uint64(0)
			if strings.Contains(ct, "json") {
				wantTok = 5
			}
			if st := g.Stats(); st.Tokens != wantTok || st.Errors != 0 {
				t.Fatalf("figures %+v", st.Figures)
			}
		})
	}
}

// A replica that answers with header lines that never end is cut at
// MaxResponseHeaderBytes: the client gets a 502, not a hang, and the
// gateway does not keep what it was sent.
func TestEndlessHeadersCutAtLimit(t *testing.T) {
	var sent atomic.Int64
	rep := Replica{ID: "a", Ready: true, Dial: func(context.Context) (net.Conn, error) {
		gw, rp := net.Pipe()
		go func() {
			defer rp.Close()
			go func() { _, _ = io.Copy(io.Discard, rp) }()
			if _, err := io.WriteString(rp, "HTTP/1.1 200 OK\r\n"); err != nil {
				return
			}
			line := []byte("X-Endless: " + strings.Repeat("y", 100) + "\r\n")
			for {
				n, err := rp.Write(line)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
		return gw, nil
	}}
	g, url := startGateway(t, Config{MaxResponseHeaderBytes: 16 << 10}, rep)
	code, _, body := get(t, newClient(t), url+"/x")
	if code != http.StatusBadGateway || errorCode(t, body) != "replica_response_too_large" {
		t.Fatalf("%d %s", code, body)
	}
	if n := sent.Load(); n > 1<<20 {
		t.Fatalf("the gateway read %d bytes of headers", n)
	}
	if st := g.Stats(); st.Errors != 1 {
		t.Fatalf("figures %+v", st.Figures)
	}
}
