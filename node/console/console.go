// Package console is the node's web console: server-rendered pages under
// /ui/ on the RPC listener, behind a login with the repo's token. It owns
// the pages, their sessions and their guards; it knows the node only
// through the RPC methods it calls (a Caller), so every figure on a page
// is what the same RPC call returns to the CLI.
//
// Everything it serves is embedded in the binary: templates, one CSS file
// and one small script (live.js: a job's output as it comes; every page
// works without it). Charts are SVG drawn here, with their values as text.
package console

import (
	"context"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/node/rpc"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Caller calls one of the node's RPC methods, as rpc.Client.Call does:
// params are encoded as JSON, the result decoded into result, and a
// JSON-RPC error comes back as *rpc.Error.
type Caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// Options configure a Console. Token and Caller are required.
type Options struct {
	Token  string // the repo's RPC token: the login's password
	Caller Caller
	// AllowRemote turns off the Host check, as rpc.allow_remote does for
	// the API: a node reached under other names than loopback ones.
	AllowRemote bool
	Log         *slog.Logger
	// Sessions live SessionTTL (default 12h); at most MaxSessions (default
	// 32) at once, the oldest dropped first.
	SessionTTL  time.Duration
	MaxSessions int
	// LoginEvery and LoginBurst bound login attempts, right or wrong
	// (default one per 6s, burst 5): the token is 256 bits, so this is
	// against a local process hammering the form, not guessing.
	LoginEvery time.Duration
	LoginBurst int
	Now        func() time.Time
	// HistoryEvery is how often the console samples its GPUs' temperature
	// and power for their charts (default a minute; below zero, never),
	// keeping HistoryLen samples a GPU (default 360: six hours). Close
	// stops it (history.go).
	HistoryEvery time.Duration
	HistoryLen   int
}

// Console serves the pages. Make one with New.
type Console struct {
	opts  Options
	sess  *sessions
	login *loginLimiter
	pages map[string]*template.Template
	mux   *http.ServeMux
	hist  *history // the GPUs' samples (history.go)
	// svcHist and mkt are the services' and the market's samples
	// (service_history.go, market_history.go), taken on hist's tick.
	svcHist *svcHistory
	mkt     *marketHistory
	live    followCount // the open follow sockets (live.go)
	// downloads holds a token per job outputs download in flight
	// (outputs.go): at most maxDownloads.
	downloads chan struct{}
}

// New returns the console. It panics without a token or a caller: an
// open console would be an open RPC.
func New(o Options) *Console {
	if o.Token == "" || o.Caller == nil {
		panic("console: New needs a token and a caller")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 32
	}
	if o.LoginEvery <= 0 {
		o.LoginEvery = 6 * time.Second
	}
	if o.LoginBurst <= 0 {
		o.LoginBurst = 5
	}
	c := &Console{opts: o, sess: newSessions(o.SessionTTL, o.MaxSessions, o.Now), login: newLoginLimiter(o.LoginEvery, o.LoginBurst, o.Now)}
	if o.HistoryEvery == 0 {
		c.opts.HistoryEvery = time.Minute
	}
	if o.HistoryLen <= 0 {
		c.opts.HistoryLen = 360
	}
	c.pages = parsePages()
	c.routes()
	c.downloads = make(chan struct{}, maxDownloads)
	c.svcHist = newSvcHistory(c.opts.HistoryLen, c.opts.HistoryEvery)
	c.mkt = newMarketHistory(c.opts.HistoryLen, c.opts.HistoryEvery)
	c.hist = c.startHistory()
	return c
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/", http.FileServerFS(assets)))
	m.HandleFunc("GET /ui/login", c.loginForm)
	m.HandleFunc("POST /ui/login", c.loginPost)
	m.Handle("POST /ui/logout", c.authed(c.logout))
	m.Handle("GET /ui/{$}", c.authed(c.overview))
	m.Handle("GET /ui/gpus", c.authed(c.gpus))
	m.Handle("GET /ui/gpus/{index}", c.authed(c.gpu))
	m.Handle("GET /ui/offer", c.authed(c.offerPage))
	m.Handle("POST /ui/offer", c.authed(c.offerPost))
	m.Handle("GET /ui/calendar", c.authed(c.calendar))
	m.Handle("GET /ui/jobs", c.authed(c.jobs))
	m.Handle("GET /ui/jobs/{id}", c.authed(c.job))
	m.Handle("GET /ui/jobs/{id}/outputs.tar", c.authed(c.outputs))
	m.HandleFunc("GET /ui/jobs/{id}/follow", c.follow) // a WebSocket: its own session and Origin checks (live.go)
	m.Handle("GET /ui/market", c.authed(c.market))
	m.Handle("GET /ui/earnings", c.authed(c.earnings))
	m.Handle("GET /ui/services", c.authed(c.services))
	m.Handle("GET /ui/services/{name}", c.authed(c.service))
	m.Handle("GET /ui/spend", c.authed(c.spend))
	m.Handle("GET /ui/reputation", c.authed(c.reputation))
	c.mux = m
}

// ServeHTTP checks the Host, sets the security headers and, for anything
// that changes state, the Origin, before routing.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !c.opts.AllowRemote && !rpc.LoopbackHost(rpc.HostName(r.Host)) {
		http.Error(w, "forbidden: Host "+quoteShort(r.Host)+" is not a loopback name; the console answers only localhost, 127.0.0.1 and [::1] unless rpc.allow_remote is set", http.StatusForbidden)
		return
	}
	securityHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := sameOrigin(r); err != "" {
			http.Error(w, "forbidden: "+err, http.StatusForbidden)
			return
		}
	}
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// Mount serves the console under /ui/ and everything else with api, so
// the API's own answers (404 for unknown paths) are unchanged.
func Mount(api, ui http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/") {
			ui.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
