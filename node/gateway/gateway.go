// Package gateway is the renter's side of an inference service: a local
// HTTP endpoint that forwards each request to one of the service's
// replicas, picks the replica by outstanding requests weighted by RTT,
// retries what is safe to retry on another replica, passes streamed
// answers through as they arrive, bounds what a hostile replica can send,
// takes replicas out and back by their readiness, and keeps the figures
// that are shown and billed (requests, errors, QPS, latency, tokens, cost).
//
// It knows nothing of libp2p or leases: a replica is an ID, a Dial
// function (the node passes Node.DialService), an RTT and a ready flag.
// The node owns the set and keeps it current with SetReplicas, Add,
// Remove, SetReady and SetRTT.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Replica defines one replica of the service.
type Replica struct {
	ID string
	// Dial opens a connection to the replica's container port; ctx bounds
	// the opening only. Each connection carries HTTP/1.1 with keep-alive.
	Dial func(ctx context.Context) (net.Conn, error)
	// RTT is the measured round trip to the replica's provider; 0 counts
	// as Config.RTTFloor.
	RTT time.Duration
	// Ready says whether requests may be routed to it. A replica added not
	// ready waits for the prober (or SetReady).
	Ready bool
	// Cost, when set, returns the credits spent on this replica so far,
	// for its cost per 1,000 requests and per million tokens.
	Cost func() auction.Credits
}

// Config tunes a gateway; a zero field takes the default beside it.
type Config struct {
	Service string // the name shown in Stats and error bodies

	// Who may call (guard.go). Token, when set, must come with every
	// request as "Authorization: Bearer <Token>" (and is not passed on to
	// the replica); Listen and Start refuse an address beyond loopback
	// without one. Hosts are names, besides loopback ones and the address
	// listened on, that a request's Host and Origin may carry (the
	// machine's LAN name, say).
	Token string
	Hosts []string

	// Limits on what one replica may send for one request.
	MaxResponseBytes       int64         // body bytes per response (64 MiB)
	MaxResponseHeaderBytes int64         // response header bytes (64 KiB)
	ResponseHeaderTimeout  time.Duration // request sent to headers received (5 min: a non-streamed completion answers when done)
	IdleTimeout            time.Duration // longest silence inside a response body (2 min)
	MaxConnsPerReplica     int           // open connections per replica (64, the provider's limit per job)

	// Retries.
	MaxReplayBody int64 // request body bytes kept to replay it on another replica (1 MiB)
	MaxAttempts   int   // replicas tried per request (3)

	// Routing.
	RTTFloor time.Duration // the least RTT a score uses (1 ms)
	// Route is how a replica is chosen: RouteScore (the default, by
	// outstanding requests × RTT, see score) or RouteRandom (uniformly
	// among the ready ones: the baseline BenchmarkRoutingByRTT compares
	// against; no reason to use it in a node).
	Route Route

	// Readiness.
	ReadyPath     string        // GET path that answers 2xx when ready ("/health")
	ProbeInterval time.Duration // between probes in RunProbes (2 s)
	ProbeTimeout  time.Duration // per probe (2 s)
	FailThreshold int           // consecutive failures that take a replica out (3)
	// OnReady, when set, hears each change of a replica's readiness made
	// by the gateway itself (probes, failed dials), not by SetReady. It
	// must not block.
	OnReady func(id string, ready bool)

	// Figures.
	Window time.Duration          // QPS window (10 s)
	Cost   func() auction.Credits // credits spent on the service so far (nil: cost 0)
	Now    func() time.Time       // clock for the figures (time.Now)
}

func (c Config) withDefaults() Config {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxResponseBytes, 64<<20)
	def(&c.MaxResponseHeaderBytes, 64<<10)
	def(&c.MaxReplayBody, 1<<20)
	defDur(&c.ResponseHeaderTimeout, 5*time.Minute)
	defDur(&c.IdleTimeout, 2*time.Minute)
	defDur(&c.RTTFloor, time.Millisecond)
	defDur(&c.ProbeInterval, 2*time.Second)
	defDur(&c.ProbeTimeout, 2*time.Second)
	defDur(&c.Window, 10*time.Second)
	if c.MaxConnsPerReplica <= 0 {
		c.MaxConnsPerReplica = 64
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.FailThreshold <= 0 {
		c.FailThreshold = 3
	}
	if c.ReadyPath == "" {
		c.ReadyPath = "/health"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Gateway is one service's local endpoint. It is an http.Handler; Listen
// or Start also serve it.
type Gateway struct {
	cfg     Config
	figs    *figures // the service's
	created time.Time
	acc     atomic.Pointer[access] // who may call; replaced by Start

	mu       sync.RWMutex // guards replicas, srv, closed
	replicas []*replica   // sorted by ID, for deterministic ties
	srv      *http.Server
	addr     net.Addr
	closed   bool
}

// New returns a gateway with no replicas.
func New(cfg Config) *Gateway {
	cfg = cfg.withDefaults()
	now := cfg.Now()
	g := &Gateway{cfg: cfg, figs: newFigures(cfg.Window, now), created: now}
	g.acc.Store(newAccess(cfg, nil))
	return g
}

// replica is a Replica's live state. Its fields are atomics so that the
// request path reads them without the gateway's lock.
type replica struct {
	id          string
	idHeader    []string // {id}, the X-Gleaner-Replica header's value
	dial        atomic.Pointer[func(context.Context) (net.Conn, error)]
	cost        atomic.Pointer[func() auction.Credits]
	rtt         atomic.Int64 // ns
	ready       atomic.Bool
	fails       atomic.Int32 // consecutive probe or dial failures
	outstanding atomic.Int64
	picked      atomic.Uint64 // times chosen, to spread ties
	tr          *http.Transport
	figs        *figures
}

func (g *Gateway) newReplica(r Replica) *replica {
	rep := &replica{id: r.ID, idHeader: []string{r.ID}, figs: newFigures(g.cfg.Window, g.cfg.Now())}
	rep.update(r)
	rep.tr = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := (*rep.dial.Load())(ctx)
			if err != nil {
				return nil, &dialError{err}
			}
			return c, nil
		},
		MaxIdleConns:           g.cfg.MaxConnsPerReplica,
		MaxIdleConnsPerHost:    g.cfg.MaxConnsPerReplica,
		MaxConnsPerHost:        g.cfg.MaxConnsPerReplica,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: g.cfg.MaxResponseHeaderBytes,
		ResponseHeaderTimeout:  g.cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		// Bytes pass through as the replica sent them; the gateway asks
		// for identity encoding (see forward) so it can read usage.
		DisableCompression: true,
	}
	return rep
}

func (rep *replica) update(r Replica) {
	dial := r.Dial
	if dial == nil {
		dial = func(context.Context) (net.Conn, error) { return nil, errors.New("replica has no dialer") }
	}
	rep.dial.Store(&dial)
	rep.cost.Store(&r.Cost)
	rep.rtt.Store(int64(r.RTT))
	rep.ready.Store(r.Ready)
}

// SetReplicas replaces the set. A replica whose ID was already there keeps
// its figures and connections and takes the new Dial, RTT, Ready and Cost.
func (g *Gateway) SetReplicas(rs []Replica) {
	g.mu.Lock()
	old := g.replicas
	next := make([]*replica, 0, len(rs))
	for _, r := range rs {
		i := slices.IndexFunc(old, func(o *replica) bool { return o.id == r.ID })
		if i >= 0 {
			old[i].update(r)
			next = append(next, old[i])
			old = slices.Delete(slices.Clone(old), i, i+1)
			continue
		}
		if slices.ContainsFunc(next, func(o *replica) bool { return o.id == r.ID }) {
			continue // a duplicate ID: the first wins
		}
		next = append(next, g.newReplica(r))
	}
	slices.SortFunc(next, func(a, b *replica) int { return cmp.Compare(a.id, b.id) })
	g.replicas = next
	g.mu.Unlock()
	for _, o := range old {
		o.tr.CloseIdleConnections()
	}
}

// Add adds r, or updates the replica with its ID.
func (g *Gateway) Add(r Replica) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rep := g.lookupLocked(r.ID); rep != nil {
		rep.update(r)
		return
	}
	next := append(slices.Clone(g.replicas), g.newReplica(r))
	slices.SortFunc(next, func(a, b *replica) int { return cmp.Compare(a.id, b.id) })
	g.replicas = next
}

// Remove takes the replica out of the set; requests in flight on it
// finish. It reports whether there was one.
func (g *Gateway) Remove(id string) bool {
	g.mu.Lock()
	i := slices.IndexFunc(g.replicas, func(o *replica) bool { return o.id == id })
	if i < 0 {
		g.mu.Unlock()
		return false
	}
	rep := g.replicas[i]
	g.replicas = slices.Delete(slices.Clone(g.replicas), i, i+1)
	g.mu.Unlock()
	rep.tr.CloseIdleConnections()
	return true
}

// Drain takes the replica out of the set, as Remove does, and then waits
// until the requests in flight on it have finished or ctx ends; it
// reports whether they all finished (false when there was no such
// replica). The node drains a replica before it cancels its job (a lease
// renewed ahead of its end, docs/SERVICES.md), so that a request that
// cannot be retried, a plain POST, is answered rather than cut with the
// container.
func (g *Gateway) Drain(ctx context.Context, id string) bool {
	rep := g.lookup(id)
	if rep == nil || !g.Remove(id) {
		return false
	}
	// A request routed from a snapshot taken just before the Remove counts
	// itself outstanding a moment later, so the count must read zero twice,
	// a tick apart.
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for zeros := 0; zeros < 2; {
		if rep.outstanding.Load() == 0 {
			zeros++
		} else {
			zeros = 0
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	rep.tr.CloseIdleConnections()
	return true
}

// SetReady marks a replica ready or not; it reports whether there was one.
// Marking it ready also clears its failure count.
func (g *Gateway) SetReady(id string, ready bool) bool {
	rep := g.lookup(id)
	if rep == nil {
		return false
	}
	if ready {
		rep.fails.Store(0)
	}
	rep.ready.Store(ready)
	return true
}

// SetRTT updates a replica's measured RTT; it reports whether there was one.
func (g *Gateway) SetRTT(id string, rtt time.Duration) bool {
	rep := g.lookup(id)
	if rep == nil {
		return false
	}
	rep.rtt.Store(int64(rtt))
	return true
}

func (g *Gateway) lookup(id string) *replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.lookupLocked(id)
}

func (g *Gateway) lookupLocked(id string) *replica {
	for _, r := range g.replicas {
		if r.id == id {
			return r
		}
	}
	return nil
}

// snapshot returns the current set; the slice is never modified in place.
func (g *Gateway) snapshot() []*replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.replicas
}

// ListenError is a failure to bind the gateway's address.
type ListenError struct {
	Addr  string
	InUse bool // the port is taken
	Err   error
}

func (e *ListenError) Error() string {
	if e.InUse {
		return fmt.Sprintf("service gateway: address %s is already in use (another program, or another service's gateway, holds the port): pick another port, or port 0 for any free one", e.Addr)
	}
	return fmt.Sprintf("service gateway: cannot listen on %s: %v", e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// Listen binds addr ("127.0.0.1:0": any free port) and serves on it until
// Close. A taken port is a *ListenError that says so.
func (g *Gateway) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ListenError{Addr: addr, InUse: errors.Is(err, syscall.EADDRINUSE), Err: err}
	}
	if err := g.Start(ln); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln.Addr(), nil
}

// Start serves on ln until Close, which closes ln. An address beyond
// loopback needs Config.Token.
func (g *Gateway) Start(ln net.Listener) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errors.New("service gateway: closed")
	}
	if g.srv != nil {
		return errors.New("service gateway: already serving")
	}
	if beyondLoopback(ln.Addr()) && g.cfg.Token == "" {
		return fmt.Errorf("service gateway: %s is reachable from other machines, so the gateway needs a bearer token: set Config.Token, or listen on 127.0.0.1", ln.Addr())
	}
	g.acc.Store(newAccess(g.cfg, ln.Addr()))
	g.srv = &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
	}
	g.addr = ln.Addr()
	srv := g.srv
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// Addr is where the gateway serves; nil before Listen or Start.
func (g *Gateway) Addr() net.Addr {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.addr
}

// Close stops serving, cuts requests in flight and drops idle connections
// to the replicas.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	srv := g.srv
	reps := g.replicas
	g.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	for _, r := range reps {
		r.tr.CloseIdleConnections()
	}
	return err
}
