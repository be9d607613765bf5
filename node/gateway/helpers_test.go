package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// backend is an in-process replica: an HTTP server on loopback that
// counts what reaches it and answers /health by its healthy flag.
type backend struct {
	srv     *httptest.Server
	hits    atomic.Int64 // requests other than /health
	healthy atomic.Bool
}

func newBackend(t testing.TB, h http.Handler) *backend {
	t.Helper()
	b := &backend{}
	b.healthy.Store(true)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			if !b.healthy.Load() {
				http.Error(w, `{"status":"loading"}`, http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		b.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// replica is b as the gateway sees it: Dial is a plain TCP dial, as
// DialService is a libp2p stream.
func (b *backend) replica(id string, rtt time.Duration) Replica {
	addr := b.srv.Listener.Addr().String()
	return Replica{ID: id, RTT: rtt, Ready: true, Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}}
}

// startGateway serves a gateway on a free loopback port and returns it
// with its base URL.
func startGateway(t testing.TB, cfg Config, rs ...Replica) (*Gateway, string) {
	t.Helper()
	g := New(cfg)
	g.SetReplicas(rs)
	addr, err := g.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g, "http://" + addr.String()
}

func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// modelHandler mimics testnet/modelserver's /v1/completions: JSON with
// usage, or with "stream": true server-sent events with the usage in the
// last chunk before [DONE]; GET /v1/models answers a list.
func modelHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
			Stream    bool   `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := req.MaxTokens
		if n == 0 {
			n = 16
		}
		prompt := len(strings.Fields(req.Prompt))
		toks := make([]string, n)
		for i := range toks {
			toks[i] = fmt.Sprintf("tok%d", i)
		}
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, n, prompt+n)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"text":%q,"index":0,"logprobs":null,"finish_reason":"length"}],"usage":%s}`,
				strings.Join(toks, " "), usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, tok := range toks {
			fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"choices\":[{\"text\":%q,\"index\":0}],\"usage\":null}\n\n", tok)
			fl.Flush()
		}
		fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":%s}\n\n", usage)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	return mux
}

// get fetches url and returns the status, the replica that answered and
// the body.
func get(t testing.TB, c *http.Client, url string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Gleaner-Replica"), string(b)
}

func post(t testing.TB, c *http.Client, url, body string, hdr ...string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Gleaner-Replica"), string(b)
}

// errorCode is the code of an OpenAI-style error body.
func errorCode(t testing.TB, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.Code
}

func replicaStats(t testing.TB, g *Gateway, id string) ReplicaStats {
	t.Helper()
	for _, r := range g.Stats().Replicas {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no replica %s in stats", id)
	return ReplicaStats{}
}
