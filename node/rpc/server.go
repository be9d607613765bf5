// Package rpc is the node's JSON-RPC 2.0 engine: a Server that serves
// registered, typed methods over HTTP POST and WebSocket (with
// subscriptions), describes them via OpenRPC ("rpc.discover"), and a Client
// for the CLI. It owns the wire protocol only; the node owns the methods.
//
// Params map onto a method's struct P by name (a JSON object, json tags) or
// by position (a JSON array, in MethodDoc.ParamNames order); absent or null
// params give the zero P. Unknown fields, wrong types and surplus positional
// params are -32602, as is an error from P's optional Validate method.
package rpc

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Server dispatches JSON-RPC calls to registered methods. Register methods
// before serving; registration stays safe afterwards but is meant for
// start-up.
type Server struct {
	authSum [32]byte // sha256 of the expected Authorization header

	maxBytes   int64
	maxBatch   int
	batchPar   int
	subQueue   int
	keepalive  time.Duration
	title, ver string
	log        *slog.Logger

	regMu   sync.Mutex                         // serialises registration
	methods atomic.Pointer[map[string]*method] // copy-on-write: lock-free reads on the hot path

	upgrader websocket.Upgrader
	bufs     sync.Pool // *[]byte request bodies
}

// ServerOption configures a Server. Zero or negative values keep the
// default, because defaults are applied after all options.
type ServerOption func(*Server)

// MaxRequestBytes caps a POST body or WebSocket message (default 1 MiB).
func MaxRequestBytes(n int64) ServerOption { return func(s *Server) { s.maxBytes = n } }

// MaxBatch caps the calls in one batch (default 100).
func MaxBatch(n int) ServerOption { return func(s *Server) { s.maxBatch = n } }

// Info sets the OpenRPC info title and version.
func Info(title, version string) ServerOption {
	return func(s *Server) { s.title, s.ver = title, version }
}

// BatchParallelism bounds how many calls of one batch run at once (default
// 4; 1 runs batches sequentially).
func BatchParallelism(n int) ServerOption { return func(s *Server) { s.batchPar = n } }

// SubscriptionQueue is how many encoded events a subscription may have
// waiting for its connection before it is ended with CodeSlowSubscriber
// (default 256).
func SubscriptionQueue(n int) ServerOption { return func(s *Server) { s.subQueue = n } }

// Keepalive is the WebSocket ping interval; a connection silent for twice
// that long is closed (default 30s).
func Keepalive(d time.Duration) ServerOption { return func(s *Server) { s.keepalive = d } }

// Logger receives handler panics and connection errors (default slog.Default()).
func Logger(l *slog.Logger) ServerOption { return func(s *Server) { s.log = l } }

// NewServer returns a server that admits requests carrying
// "Authorization: Bearer <token>". An empty token panics: an open RPC
// endpoint would let any local process spend the node's money.
func NewServer(token string, opts ...ServerOption) *Server {
	if token == "" {
		panic("rpc: NewServer with empty token")
	}
	s := &Server{authSum: sha256.Sum256([]byte("Bearer " + token))}
	for _, o := range opts {
		o(s)
	}
	s.defaults()
	s.methods.Store(&map[string]*method{})
	// Browsers cannot attach an Authorization header to a WebSocket
	// handshake, so the bearer check already rules out cross-site use and
	// an Origin check would only get in the way of non-browser clients.
	s.upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	s.registerBuiltins()
	return s
}

func (s *Server) defaults() {
	if s.maxBytes <= 0 {
		s.maxBytes = 1 << 20
	}
	if s.maxBatch <= 0 {
		s.maxBatch = 100
	}
	if s.batchPar <= 0 {
		s.batchPar = 4
	}
	if s.subQueue <= 0 {
		s.subQueue = 256
	}
	if s.keepalive <= 0 {
		s.keepalive = 30 * time.Second
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.title == "" {
		s.title = "gleaner"
	}
}

func (s *Server) add(m *method) {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	old := *s.methods.Load()
	if _, dup := old[m.name]; dup {
		panic("rpc: method " + m.name + " registered twice")
	}
	next := make(map[string]*method, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[m.name] = m
	s.methods.Store(&next)
}

func (s *Server) lookup(name string) *method { return (*s.methods.Load())[name] }

// Methods returns the registered method names, sorted, without the
// built-ins "rpc.discover" and "unsubscribe".
func (s *Server) Methods() []string {
	var names []string
	for name, m := range *s.methods.Load() {
		if !m.builtin {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Handler serves POST / and the WebSocket upgrade on GET /ws (or GET /).
// The token is checked before anything else, so an unauthenticated request
// can neither run a method nor learn which paths exist.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, errUnauthorized)
		return
	}
	upgrade := r.Method == http.MethodGet && websocket.IsWebSocketUpgrade(r)
	switch {
	case r.URL.Path != "/" && r.URL.Path != "/ws":
		writeError(w, http.StatusNotFound, invalidRequest("no such path "+strconv.Quote(r.URL.Path)))
	case upgrade:
		s.serveWS(w, r)
	case r.URL.Path == "/" && r.Method == http.MethodPost:
		s.servePOST(w, r)
	default:
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, invalidRequest("use POST / or a WebSocket upgrade on GET /ws"))
	}
}

// authorized compares digests so that the comparison is constant-time
// regardless of the header's length.
func (s *Server) authorized(r *http.Request) bool {
	got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	return subtle.ConstantTimeCompare(got[:], s.authSum[:]) == 1
}

func (s *Server) servePOST(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, invalidRequest("Content-Type must be application/json"))
		return
	}
	if r.ContentLength > s.maxBytes {
		writeError(w, http.StatusRequestEntityTooLarge, errTooLarge)
		return
	}
	bp := s.getBuf()
	defer s.bufs.Put(bp)
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.maxBytes), (*bp)[:0])
	*bp = body
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, errTooLarge)
		}
		return // otherwise the client went away mid-body; nobody to answer
	}
	out, _ := s.process(r.Context(), body, nil)
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getBuf reuses request buffers: at 10k+ req/s the body allocation is
// a noticeable share of the per-request garbage.
func (s *Server) getBuf() *[]byte {
	if bp, ok := s.bufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 4096)
	return &b
}

// readAll is io.ReadAll into a caller-owned buffer.
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
	}
}

func writeError(w http.ResponseWriter, status int, e *Error) {
	writeJSON(w, status, appendResponse(nil, nil, nil, e))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
