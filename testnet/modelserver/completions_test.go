package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCompletionShapeAndUsage: a non-streamed completion has OpenAI's
// shape, deterministic text of max_tokens tokens, and usage that counts
// the prompt by whitespace.
func TestCompletionShapeAndUsage(t *testing.T) {
	ts := start(t, defaults(t))
	var c completion
	decodeAs(t, post(t, ts.URL, map[string]any{
		"model": "gleaner-test-model", "prompt": "  the quick\tbrown\n fox ", "max_tokens": 5, "temperature": 0.7,
	}), http.StatusOK, &c)
	if !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" || c.Model != "gleaner-test-model" || c.Created == 0 {
		t.Fatalf("header fields: %+v", c)
	}
	if len(c.Choices) != 1 || c.Choices[0].Text != "tok0 tok1 tok2 tok3 tok4" || c.Choices[0].Index != 0 ||
		c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "length" {
		t.Fatalf("choices: %+v", c.Choices)
	}
	if c.Usage == nil || *c.Usage != (usage{PromptTokens: 4, CompletionTokens: 5, TotalTokens: 9}) {
		t.Fatalf("usage: %+v", c.Usage)
	}
	var again completion
	decodeAs(t, post(t, ts.URL, `{"model":"gleaner-test-model"}`), http.StatusOK, &again)
	if again.ID == c.ID || again.Usage.CompletionTokens != defaultMaxTokens || again.Usage.PromptTokens != 0 {
		t.Fatalf("second completion (no prompt, no max_tokens): %+v %+v", again, again.Usage)
	}
}

// TestTokensKnobStopsEarly: -tokens makes the model stop by itself before
// max_tokens, with finish_reason "stop".
func TestTokensKnobStopsEarly(t *testing.T) {
	cfg := defaults(t)
	cfg.Tokens = 3
	ts := start(t, cfg)
	var c completion
	decodeAs(t, post(t, ts.URL, `{"model":"gleaner-test-model","prompt":"hi","max_tokens":10}`), http.StatusOK, &c)
	if c.Choices[0].Text != "tok0 tok1 tok2" || *c.Choices[0].FinishReason != "stop" || c.Usage.TotalTokens != 4 {
		t.Fatalf("%+v %+v", c.Choices, c.Usage)
	}
}

// TestCompletionDelay: a non-streamed answer takes ttft + (n-1) delays.
func TestCompletionDelay(t *testing.T) {
	cfg := defaults(t)
	cfg.TTFT, cfg.TokenDelay = 100*time.Millisecond, 50*time.Millisecond
	ts := start(t, cfg)
	t0 := time.Now()
	var c completion
	decodeAs(t, post(t, ts.URL, `{"model":"gleaner-test-model","max_tokens":3}`), http.StatusOK, &c)
	if took := time.Since(t0); took < 200*time.Millisecond {
		t.Fatalf("answered in %v, want at least 200ms", took)
	}
}

func TestModels(t *testing.T) {
	cfg := defaults(t)
	cfg.Model = "m-7b"
	ts := start(t, cfg)
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l modelList
	decodeAs(t, resp, http.StatusOK, &l)
	if l.Object != "list" || len(l.Data) != 1 || l.Data[0].ID != "m-7b" || l.Data[0].Object != "model" || l.Data[0].OwnedBy == "" {
		t.Fatalf("%+v", l)
	}
}

// TestReadiness: /health and /v1 answer 503 until the load delay has
// passed, then 200; -test-never-ready keeps them at 503 for good.
func TestReadiness(t *testing.T) {
	var clock atomic.Int64 // seconds past start
	base := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return base.Add(time.Duration(clock.Load()) * time.Second) }
	status := func(ts *httptest.Server, method, path string) int {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(`{"model":"gleaner-test-model","max_tokens":1}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cfg := defaults(t)
	cfg.LoadDelay = 30 * time.Second
	ts := httptest.NewServer(newServer(cfg, now).handler())
	defer ts.Close()
	cfg.NeverReady = true
	never := httptest.NewServer(newServer(cfg, now).handler())
	defer never.Close()
	for _, step := range []struct {
		at          int64
		want, never int
	}{{0, 503, 503}, {29, 503, 503}, {30, 200, 503}, {3600, 200, 503}} {
		clock.Store(step.at)
		for _, ep := range [][2]string{{"GET", "/health"}, {"GET", "/v1/models"}, {"POST", "/v1/completions"}} {
			if got := status(ts, ep[0], ep[1]); got != step.want {
				t.Errorf("at %ds %s %s: %d, want %d", step.at, ep[0], ep[1], got, step.want)
			}
			if got := status(never, ep[0], ep[1]); got != step.never {
				t.Errorf("never-ready at %ds %s %s: %d, want %d", step.at, ep[0], ep[1], got, step.never)
			}
		}
	}
}

// TestBadInputs: every malformed request gets its status and an
// OpenAI-style error object, never a completion.
func TestBadInputs(t *testing.T) {
	ts := start(t, defaults(t))
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"not json", `{"model":`, 400, "invalid_json"},
		{"trailing data", `{"model":"gleaner-test-model"} {}`, 400, "invalid_json"},
		{"array body", `[1,2]`, 400, "invalid_json"},
		{"max_tokens not int", `{"model":"gleaner-test-model","max_tokens":1e30}`, 400, "invalid_json"},
		{"missing model", `{"prompt":"hi"}`, 400, "missing_model"},
		{"unknown model", `{"model":"gpt-4","prompt":"hi"}`, 404, "model_not_found"},
		{"prompt not string", `{"model":"gleaner-test-model","prompt":{"a":1}}`, 400, "invalid_prompt"},
		{"max_tokens zero", `{"model":"gleaner-test-model","max_tokens":0}`, 400, "invalid_max_tokens"},
		{"max_tokens negative", `{"model":"gleaner-test-model","max_tokens":-1}`, 400, "invalid_max_tokens"},
		{"max_tokens over cap", `{"model":"gleaner-test-model","max_tokens":4097}`, 400, "invalid_max_tokens"},
		{"body over 1 MiB", `{"model":"gleaner-test-model","prompt":"` + strings.Repeat("a ", maxBody/2) + `"}`, 413, "request_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e apiError
			decodeAs(t, post(t, ts.URL, c.body), c.status, &e)
			if e.Error.Code == nil || *e.Error.Code != c.code || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
				t.Fatalf("error body: %+v", e.Error)
			}
		})
	}
	// The bound is the limit, not lower: a body just under it is served.
	near := `{"model":"gleaner-test-model","prompt":"` + strings.Repeat("a ", (maxBody-100)/2) + `"}`
	var c completion
	decodeAs(t, post(t, ts.URL, near), http.StatusOK, &c)
	if c.Usage.PromptTokens != (maxBody-100)/2 {
		t.Fatalf("near-limit prompt: %d tokens", c.Usage.PromptTokens)
	}
	resp, err := http.Get(ts.URL + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/completions: %d", resp.StatusCode)
	}
}
