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
	"os"
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
	budget     int
	keepalive  time.Duration
	bodyWait   time.Duration
	replyWait  time.Duration
	title, ver string
	log        *slog.Logger

	allowRemote bool            // skip the Host check
	anyOrigin   bool            // "*" among the allowed origins
	origins     map[string]bool // CanonicalOrigin form

	regMu   sync.Mutex                         // serialises registration
	methods atomic.Pointer[map[string]*method] // copy-on-write: lock-free reads on the hot path

	upgrader websocket.Upgrader
	bufs     sync.Pool // *[]byte request bodies
	discover atomic.Pointer[discoverCache]
	observe  atomic.Pointer[CallObserver] // nil: calls are not timed (observe.go)
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

// ResponseBudget caps the reply bytes one batch may produce (default
// 1 MiB, the same as the request limit): once the results of a batch's
// finished calls pass it, the calls not yet started are answered with
// CodeResponseBudget instead of being run. The first call of a batch always
// runs, so resending the refused calls always makes progress.
func ResponseBudget(n int) ServerOption { return func(s *Server) { s.budget = n } }

// BodyTimeout is how long a POST may take to deliver its body once its
// headers are in (default 10s); a slower one is answered 408 and closed.
// Header reading is the http.Server's ReadHeaderTimeout. WebSocket
// connections are not affected: they have Keepalive.
func BodyTimeout(d time.Duration) ServerOption { return func(s *Server) { s.bodyWait = d } }

// ReplyTimeout is how long a POST reply may take to be written (default
// 30s): a client that stops reading cannot pin the reply's buffer and
// goroutine for ever.
func ReplyTimeout(d time.Duration) ServerOption { return func(s *Server) { s.replyWait = d } }

// AllowRemote turns off the Host check, which otherwise refuses (403) any
// request whose Host header is not localhost, 127.0.0.0/8 or [::1]: a node
// that listens on a non-loopback address is reached under other names.
// The Origin check stays on.
func AllowRemote(allow bool) ServerOption { return func(s *Server) { s.allowRemote = allow } }

// AllowOrigins admits requests that carry one of these Origin headers
// (scheme://host[:port]; "*" for any), besides this server's own loopback
// origins. Requests without an Origin (non-browser clients) need none.
// An entry that CanonicalOrigin rejects panics: validate user input first.
func AllowOrigins(origins ...string) ServerOption {
	return func(s *Server) {
		for _, o := range origins {
			c, err := CanonicalOrigin(o)
			if err != nil {
				panic("rpc: AllowOrigins: " + err.Error())
			}
			if c == "*" {
				s.anyOrigin = true
			}
			if s.origins == nil {
				s.origins = map[string]bool{}
			}
			s.origins[c] = true
		}
	}
}

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
	// serveHTTP has checked Host and Origin before the token; checking the
	// Origin again here keeps the upgrade safe should that order change.
	// gorilla's default (Origin host = Host) would admit a DNS-rebinding
	// page's own origin when remote access is allowed, so the upgrade gets
	// the same rule as POST.
	s.upgrader = websocket.Upgrader{CheckOrigin: func(r *http.Request) bool { return s.checkOrigin(r) == nil }}
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
	if s.budget <= 0 {
		s.budget = 1 << 20
	}
	if s.bodyWait <= 0 {
		s.bodyWait = 10 * time.Second
	}
	if s.replyWait <= 0 {
		s.replyWait = 30 * time.Second
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
// Host and Origin (see checkHost) and then the token are checked before
// anything else, so a refused request can neither run a method nor learn
// which paths exist.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if e := s.checkHost(r); e != nil {
		writeError(w, http.StatusForbidden, e)
		return
	}
	if e := s.checkOrigin(r); e != nil {
		writeError(w, http.StatusForbidden, e)
		return
	}
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
	// The http.Server's ReadHeaderTimeout ends with the headers; without a
	// deadline here an authenticated client could hold a goroutine and a
	// buffer for ever by sending half a body. net/http lifts it when the
	// body hits EOF (its background read clears the read deadline), so it
	// does not cut calls that run longer than it.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.bodyWait)) // errors: not a net/http conn; nothing to bound
	bp := s.getBuf()
	defer s.bufs.Put(bp)
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.maxBytes), (*bp)[:0])
	*bp = body
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, errTooLarge)
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, invalidRequest("request body not received within "+s.bodyWait.String()))
		}
		return // otherwise the client went away mid-body; nobody to answer
	}
	out, _ := s.process(r.Context(), body, nil)
	// net/http flushes the reply's tail after we return and only then
	// clears the write deadline, so this covers the whole reply and not the
	// next request on the connection.
	rc.SetWriteDeadline(time.Now().Add(s.replyWait))
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
