package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// server answers the HTTP API. Its only mutable state is the completion
// id counter.
type server struct {
	cfg   config
	now   func() time.Time // injected so that tests can step past LoadDelay
	start time.Time
	ids   atomic.Uint64
}

func newServer(cfg config, now func() time.Time) *server {
	return &server{cfg: cfg, now: now, start: now()}
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /v1/models", s.whenReady(s.models))
	mux.HandleFunc("POST /v1/completions", s.whenReady(s.completions))
	return mux
}

// shutdownGrace is how long in-flight requests get after SIGTERM: less
// than `docker stop`'s default 10 s, so the process exits 0 by itself.
const shutdownGrace = 5 * time.Second

// run serves on ln until ctx ends, then shuts down gracefully.
func run(ctx context.Context, cfg config, ln net.Listener) error {
	srv := &http.Server{
		Handler: newServer(cfg, time.Now).handler(),
		// No ReadTimeout or WriteTimeout: a stream may rightly run for
		// minutes. The completions handler bounds its own body read.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// A stream that outlived the grace (-test-endless): cut it.
		srv.Close()
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // cut streams are the knob's point, not a failure
	}
	return err
}

func (s *server) ready() bool {
	return !s.cfg.NeverReady && s.now().Sub(s.start) >= s.cfg.LoadDelay
}

// health is the readiness probe a gateway polls: 503 while "loading".
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if !s.ready() {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "loading"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// whenReady answers 503 until the model is loaded, as a real server that
// listens before its weights are in memory does.
func (s *server) whenReady(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.ready() {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "server_error", "model_loading", "", "the model is still loading")
			return
		}
		h(w, r)
	}
}

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []model{
		{ID: s.cfg.Model, Object: "model", Created: s.start.Unix(), OwnedBy: "gleaner"},
	}})
}

// apiError is OpenAI's error body, so that clients report it as they
// would a real server's.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	var e apiError
	e.Error.Message, e.Error.Type = msg, typ
	if code != "" {
		e.Error.Code = &code
	}
	if param != "" {
		e.Error.Param = &param
	}
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}
