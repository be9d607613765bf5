package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// stream answers with server-sent events, one chunk per token, each
// flushed as it is made so that a client (or a gateway in between) sees
// tokens at the model's pace. After the last token comes a chunk with no
// choices and the usage, as OpenAI sends with stream_options.include_usage
// (sent here always, since a metering gateway needs it), then [DONE].
func (s *server) stream(ctx context.Context, w http.ResponseWriter, c completion, j job) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := w.Write([]byte("data: " + string(b) + "\n\n")); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for i := 0; s.cfg.Endless || i < j.n; i++ {
		wait := s.cfg.TokenDelay
		if i == 0 {
			wait = s.cfg.TTFT
		}
		if !sleep(ctx, wait) {
			return
		}
		ch := choice{Text: token(i)}
		if !s.cfg.Endless && i == j.n-1 {
			ch.FinishReason = &j.finish
		}
		c.Choices = []choice{ch}
		if !send(c) {
			return
		}
	}
	c.Choices = []choice{}
	c.Usage = &usage{j.prompt, j.n, j.prompt + j.n}
	if send(c) {
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	}
}

// endless is -test-endless without streaming: a JSON body whose text
// never closes, for testing that a gateway bounds what it buffers. It
// ends only when the client goes away.
func (s *server) endless(ctx context.Context, w http.ResponseWriter, c completion) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	head, _ := json.Marshal(c)
	// Open the text field of the first choice and never close it.
	prefix := strings.TrimSuffix(string(head), `"choices":null,"usage":null}`) + `"choices":[{"text":"`
	if _, err := w.Write([]byte(prefix)); err != nil {
		return
	}
	rc := http.NewResponseController(w)
	chunk := []byte(strings.Repeat("tok ", 1024))
	for sleep(ctx, s.cfg.TokenDelay) {
		if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
			return
		}
	}
}
