package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds a request body: prompts here are test text, and anything
// larger is hostile.
const maxBody = 1 << 20

// bodyReadTimeout bounds how long a client may take to send its body, in
// place of a server-wide ReadTimeout that would also cut long streams.
const bodyReadTimeout = 30 * time.Second

// completionRequest holds the fields this server acts on; the rest
// (temperature, stop, ...) are accepted and ignored, as a client sends them.
type completionRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens"`
	Stream    bool            `json:"stream"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"` // null in a stream's token chunks
}

type choice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"` // always null
	FinishReason *string `json:"finish_reason"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// job is one validated request: what to generate.
type job struct {
	prompt int // prompt tokens
	n      int // completion tokens
	finish string
	stream bool
}

func (s *server) completions(w http.ResponseWriter, r *http.Request) {
	j, ok := s.parse(w, r)
	if !ok {
		return
	}
	c := completion{
		ID:      "cmpl-" + strconv.FormatUint(s.ids.Add(1), 10),
		Object:  "text_completion",
		Created: s.now().Unix(),
		Model:   s.cfg.Model,
	}
	switch {
	case j.stream:
		s.stream(r.Context(), w, c, j)
	case s.cfg.Endless:
		s.endless(r.Context(), w, c)
	default:
		// All at once, after as long as generating it would take.
		if !sleep(r.Context(), s.cfg.TTFT+time.Duration(j.n-1)*s.cfg.TokenDelay) {
			return
		}
		var text strings.Builder
		for i := range j.n {
			text.WriteString(token(i))
		}
		c.Choices = []choice{{Text: text.String(), FinishReason: &j.finish}}
		c.Usage = &usage{j.prompt, j.n, j.prompt + j.n}
		writeJSON(w, http.StatusOK, c)
	}
}

// parse reads and checks the request, answering the client itself when
// it is bad.
func (s *server) parse(w http.ResponseWriter, r *http.Request) (job, bool) {
	bad := func(status int, code, param, msg string) (job, bool) {
		writeError(w, status, "invalid_request_error", code, param, msg)
		return job{}, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	var req completionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	err := dec.Decode(&req)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("data after the JSON object")
	}
	_ = rc.SetReadDeadline(time.Time{}) // a stream may run long after
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return bad(http.StatusRequestEntityTooLarge, "request_too_large", "", fmt.Sprintf("request body over %d bytes", maxBody))
	}
	if err != nil {
		return bad(http.StatusBadRequest, "invalid_json", "", "invalid JSON body: "+err.Error())
	}
	if req.Model == "" {
		return bad(http.StatusBadRequest, "missing_model", "model", "model is required")
	}
	if req.Model != s.cfg.Model {
		return bad(http.StatusNotFound, "model_not_found", "model", fmt.Sprintf("the model %q does not exist", req.Model))
	}
	var prompt string
	if len(req.Prompt) > 0 && string(req.Prompt) != "null" {
		if err := json.Unmarshal(req.Prompt, &prompt); err != nil {
			return bad(http.StatusBadRequest, "invalid_prompt", "prompt", "prompt must be a string")
		}
	}
	j := job{prompt: len(strings.Fields(prompt)), n: defaultMaxTokens, finish: "length", stream: req.Stream}
	if req.MaxTokens != nil {
		j.n = *req.MaxTokens
	}
	if j.n < 1 || j.n > s.cfg.MaxTokens {
		return bad(http.StatusBadRequest, "invalid_max_tokens", "max_tokens", fmt.Sprintf("max_tokens must be 1 to %d", s.cfg.MaxTokens))
	}
	if s.cfg.Tokens > 0 && s.cfg.Tokens < j.n {
		j.n, j.finish = s.cfg.Tokens, "stop"
	}
	return j, true
}

// token is the i-th token's text: the completion reads "tok0 tok1 ...",
// and a stream's chunks join to the same string.
func token(i int) string {
	if i == 0 {
		return "tok0"
	}
	return " tok" + strconv.Itoa(i)
}

// sleep waits d, or less if ctx ends first (the client went away); it
// says whether to go on.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
