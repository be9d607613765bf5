// Package node is gleaner's composition root: it reads a repo and its
// config, wires the p2p host and the local JSON-RPC API together, and owns
// their lifecycle. Components start in dependency order; Stop stops taking
// work, cancels and waits for the background work, then closes what it
// used in reverse order.
package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/node/journal"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/peers"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	madns "github.com/multiformats/go-multiaddr-dns"
)

// Version is the gleaner release; the linker sets it for release builds.
var Version = "0.1.0-dev"

// Options are the knobs that do not belong in config.toml because they
// describe how this process runs rather than what the node is.
type Options struct {
	Logger *slog.Logger
	// InProcess skips NAT services and mDNS regardless of config, so that a
	// test can run dozens of nodes on two cores without multicast noise.
	InProcess bool
	// WrapHost, when set, supplies the libp2p host instead of p2p.New
	// building one: tests run nodes over mocknet links with simulated
	// latency this way. It gets the identity and must return a host that
	// p2p.NewFromHost can wrap.
	WrapHost func(ctx context.Context, key crypto.PrivKey) (host.Host, error)
	// BillingInterval is written into this node's leases as a renter:
	// vouchers are signed once per interval (default 5 min).
	BillingInterval time.Duration
	// StopPayingAfter is fault injection for tests: as a renter, stop
	// sending vouchers after this many per run (0 = never).
	StopPayingAfter int
	// WrongAnswers is fault injection for tests: as a provider, report a
	// made-up output hash, as one that skipped the work would.
	WrongAnswers bool
	// StartDeadline is how long a provider holds an award's GPUs for its
	// renter to start it (default auction/provider.DefaultStartDeadline). Tests shorten it.
	StartDeadline time.Duration
	// DNSResolver resolves /dnsaddr bootstrap names; nil is the system's.
	// Tests point it at a DNS server of their own.
	DNSResolver *madns.Resolver
	// OfferTTL is how long a published offer stays valid (default 1 h); it
	// is re-announced at 11/12 of that, and at once when it changes. Tests
	// shorten it.
	OfferTTL time.Duration
	// GPUSource, when set, is the GPUs this node sells, instead of NVML or
	// provider.simulate_gpus: tests drive an attest.Fake's inventory,
	// compute processes and health through the node's own monitor.
	GPUSource attest.Source
	// GPUMonitorInterval is how often the GPU monitor polls (default
	// attest.DefaultMonitorInterval). Tests shorten it.
	GPUMonitorInterval time.Duration
}

// Node is one running gleaner node.
type Node struct {
	repo *repo.Repo
	cfg  repo.Config
	opts Options
	log  *slog.Logger

	host           *p2p.Host
	store          *store.Store
	data           *data.Store // content-addressed blocks: inputs, outputs, datasets (node_data.go)
	exchange       *data.Exchange
	access         *data.Access        // who may fetch which blocks (node_access.go)
	boot           *peers.Bootstrapper // retries the bootstrap list until connected (node/peers)
	fetching       sync.Map            // CID string -> *fetchProgress: fetches in flight (node_data.go)
	journal        *journal.Journal    // this node's records that callers need not wait for
	known          *peers.Known        // the peers it was connected to, kept across restarts (node/peers)
	knownAtStart   []peer.AddrInfo     // known peers of the last run, dialled by startReconnect
	market         *offers.Market
	provider       *provider
	providerJobs   *providing.Provider
	services       *providing.Forwarder // serves service jobs' ports to their renters
	gangs          *gangnet.Net         // carries gang members' connections between providers
	ledger         *ledger.Store
	feeds          *feeds
	rep            *renting.Reputation
	claims         *providing.Claimer // nil on a node without GPUs to sell
	renterJobs     *renting.Jobs
	renterServices *services.Manager // the renter's services and their gateways (node/services)
	gpus           attest.Source
	gpuMon         *attest.Monitor   // set with gpus; its fault counts feed the metrics
	ownJobs        providing.OwnJobs // the GPU monitor's view of which processes are jobs
	rpc            *rpc.Server
	httpSrv        *http.Server
	url            string
	metrics        *nodeMetrics // nil while metrics.address is "" (node_metrics.go)
	started        time.Time
	newRepo        bool // neither node.db nor ledger.db existed at Start

	// bg is the context of all background work; Stop cancels it and
	// waits for tasks before it runs closers.
	bg     context.Context
	cancel context.CancelFunc
	tasks  tasks

	mu      sync.Mutex
	stops   []func(context.Context) error // what takes work in (API, offer): run first by Stop, in reverse order
	closers []func(context.Context) error // what the background work uses (stores, Docker): run last, in reverse order
	stopped bool
}

// New prepares a node; nothing runs until Start.
func New(rp *repo.Repo, cfg repo.Config, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BillingInterval <= 0 {
		opts.BillingInterval = renting.DefaultBillingInterval
	}
	if opts.OfferTTL <= 0 {
		opts.OfferTTL = time.Hour
	}
	return &Node{repo: rp, cfg: cfg, opts: opts, log: opts.Logger}, nil
}

// Start starts the node's components (components.go) in order. On any
// error everything already started is stopped again.
func (n *Node) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = n.Stop(context.Background())
		}
	}()
	n.started = time.Now()
	n.bg, n.cancel = context.WithCancel(context.Background())
	for _, c := range n.components() {
		// The components' errors say what failed in words of their own
		// ("rpc: cannot listen on ..."); wrapping them would bury that.
		if err := c.start(ctx); err != nil {
			n.log.Debug("component did not start", "component", c.name, "err", err)
			return err
		}
	}
	return nil
}

func (n *Node) startHost(ctx context.Context) error {
	key, err := n.repo.Identity()
	if err != nil {
		return err
	}
	opts, err := n.hostOptions(ctx)
	if err != nil {
		return err
	}
	var h *p2p.Host
	if n.opts.WrapHost != nil {
		lh, werr := n.opts.WrapHost(ctx, key)
		if werr != nil {
			return fmt.Errorf("start p2p host: %w", werr)
		}
		h, err = p2p.NewFromHost(ctx, lh, opts...)
	} else {
		h, err = p2p.New(ctx, append(opts, p2p.Identity(key))...)
	}
	if err != nil {
		return fmt.Errorf("start p2p host: %w", err)
	}
	n.host = h // Stop closes it (see there)
	// Served from the start, RPC or not: peers' node_doctor asks for it.
	h.ServeClock()
	return nil
}

func (n *Node) hostOptions(ctx context.Context) ([]p2p.Option, error) {
	c := n.cfg
	listen := make([]ma.Multiaddr, 0, len(c.P2P.Listen))
	for _, s := range c.P2P.Listen {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("p2p.listen %q: %w", s, err)
		}
		listen = append(listen, m)
	}
	boot, err := peers.NewBootstrapper(c.Network, c.P2P.Bootstrap, c.P2P.BootstrapFallback, n.opts.DNSResolver, n.log)
	if err != nil {
		return nil, err
	}
	n.boot = boot
	opts := []p2p.Option{
		p2p.Network(c.Network),
		p2p.ListenAddrs(listen...),
		p2p.Bootstrap(boot.Initial(ctx)...),
		p2p.MDNS(c.P2P.MDNS && !n.opts.InProcess),
		p2p.RelayService(c.P2P.RelayService),
		p2p.RelayCircuitLimits(time.Duration(c.P2P.RelayCircuitS)*time.Second, int64(c.P2P.RelayCircuitMB)<<20),
		p2p.DHTMode(c.P2P.DHTMode),
		p2p.ConnLimits(c.Limits.ConnectionsLow, c.Limits.ConnectionsHigh),
		p2p.ResourceLimits(int64(c.Limits.MaxMemoryMB)<<20, c.Limits.MaxFileDescs),
		p2p.Logger(n.log),
	}
	if !c.P2P.NATTraversal || n.opts.InProcess {
		opts = append(opts, p2p.DisableNATServices())
	}
	return opts, nil
}

func (n *Node) startRPC() error {
	tok, err := n.repo.Token()
	if err != nil {
		return err
	}
	n.rpc = rpc.NewServer(tok, rpc.Info("gleaner node API", Version), rpc.AllowRemote(n.cfg.RPC.AllowRemote), rpc.AllowOrigins(n.cfg.RPC.AllowedOrigins...))
	registerNodeAPI(n.rpc, n)
	registerOfferAPI(n.rpc, n)
	registerMarketAPI(n.rpc, n)
	registerJobAPI(n.rpc, n)
	services.RegisterAPI(n.rpc, func() *services.Manager { return n.renterServices })
	registerLeaseAPI(n.rpc, n)
	registerLedgerAPI(n.rpc, n)
	registerRepAPI(n.rpc, n)
	registerBalanceAPI(n.rpc, n)
	registerDataAPI(n.rpc, n)
	registerJobFetchAPI(n.rpc, n)
	registerDoctorAPI(n.rpc, n)

	ln, err := net.Listen("tcp", n.cfg.RPC.Address)
	if err != nil {
		return fmt.Errorf("rpc: cannot listen on %s: %w (is another daemon using it? pick another with --rpc 127.0.0.1:0)", n.cfg.RPC.Address, err)
	}
	n.url = "http://" + ln.Addr().String()
	n.httpSrv = &http.Server{
		Handler:           n.withConsole(n.instrumentRPC(n.rpc.Handler()), tok),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() {
		if err := n.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("rpc server stopped", "err", err)
		}
	}()
	n.onStop(func(ctx context.Context) error { return n.httpSrv.Shutdown(ctx) })
	if !repo.IsLoopback(hostOf(ln.Addr())) {
		n.log.Warn("RPC API listens on a non-loopback address: anyone who can reach it and holds the token controls this node", "addr", ln.Addr())
	}
	if err := n.repo.WriteURL(n.url); err != nil {
		return fmt.Errorf("write %s: %w", repo.URLFile, err)
	}
	n.onStop(func(context.Context) error { return n.repo.RemoveURL() })
	return nil
}

// exists reports whether path is there (an unreadable one counts: the
// store's open will say what is wrong with it).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

func hostOf(a net.Addr) string {
	h, _, _ := net.SplitHostPort(a.String())
	return h
}

// onStop registers a step that stops work coming in (the API, the offer).
func (n *Node) onStop(f func(context.Context) error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stops = append(n.stops, f)
}

// onClose registers the release of something background work uses: it
// runs only once that work has ended.
func (n *Node) onClose(f func(context.Context) error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closers = append(n.closers, f)
}

// Stop stops the node in three phases, also after a Start that failed
// halfway:
//
//  1. what takes work in, in reverse start order: the rpc.url file, the
//     API (in-flight calls finish), the offer (a signed withdrawal, while
//     the host and the stores are up);
//  2. the background work: its context is cancelled, the p2p host closed
//     (so that nothing stays blocked on a peer), and every goroutine the
//     node started is waited for, until ctx ends;
//  3. what that work used, in reverse order of opening: the Docker client
//     and the GPU source, the journal (drained into the feed), ledger.db,
//     node.db, the repo lock.
//
// So no store closes under a goroutine that still writes to it. If ctx
// ends first, Stop says how many goroutines still run and closes anyway:
// a process that must exit gains nothing from waiting longer (bbolt is
// crash-safe). Stop is idempotent and returns the first error, after
// trying every step.
func (n *Node) Stop(ctx context.Context) error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.stopped = true
	stops, closers := n.stops, n.closers
	n.mu.Unlock()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for i := len(stops) - 1; i >= 0; i-- {
		keep(stops[i](ctx))
	}
	if n.cancel != nil {
		n.cancel()
	}
	if n.host != nil {
		keep(n.host.Close())
	}
	if err := n.tasks.wait(ctx); err != nil {
		n.log.Warn("stopping without waiting any longer", "err", err)
		keep(err)
	}
	for i := len(closers) - 1; i >= 0; i-- {
		keep(closers[i](ctx))
	}
	return first
}

// RPCURL is the URL of the node's JSON-RPC endpoint.
func (n *Node) RPCURL() string { return n.url }

// Host is the node's p2p host.
func (n *Node) Host() *p2p.Host { return n.host }

// Repo is the node's repo.
func (n *Node) Repo() *repo.Repo { return n.repo }

// Network is the name of the network the node is on.
func (n *Node) Network() string { return n.cfg.Network }

// Book is the offer book this node has gathered from the network, once
// Start has returned. The node's market owns its contents; callers only
// read it (Snapshot, Get), as testnet's central broker, the baseline the
// market is measured against, picks its providers from it.
func (n *Node) Book() *auction.Book { return n.market.Book() }

// DialService opens a connection to jobID's service on provider, which
// must be connected or dialable. ctx bounds the opening only; the
// connection lives until closed, with the provider's limits on its bytes
// and idle time.
func (n *Node) DialService(ctx context.Context, provider peer.ID, jobID string) (net.Conn, error) {
	return services.Dial(ctx, n.host, provider, jobID)
}

// GPUSource is where the node reads its GPUs (nil when it has none). Tests
// and tools use it to drive simulated GPUs' load.
func (n *Node) GPUSource() attest.Source { return n.gpus }
