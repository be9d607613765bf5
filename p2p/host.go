// Package p2p owns the libp2p host, the Kademlia DHT, gossipsub, peer
// discovery and stream framing for one gleaner network N. It is a leaf: it
// knows nothing of GPUs or money. Every identifier it puts on the wire
// carries N (/gleaner/N/...), so that nodes of different networks never mix.
package p2p

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	routedhost "github.com/libp2p/go-libp2p/p2p/host/routed"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	tls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// closeTimeout bounds Close: a node shutting down must not hang on a peer
// that stopped reading.
const closeTimeout = 2500 * time.Millisecond

// Host is one node's presence on network N: a libp2p host with the DHT,
// gossipsub and discovery wired to it. Safe for concurrent use.
type Host struct {
	cfg    *config
	h      host.Host
	lh     host.Host // what LibP2P hands out: h, routed and relay-capable (relay.go)
	dht    *dht.IpfsDHT
	ps     *pubsub.PubSub
	log    *slog.Logger
	gater  *foreignGater
	closer []io.Closer // extra services (mDNS), closed before the host

	ctx    context.Context // lives until Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	reach atomic.Value // string: AutoNAT's "unknown" | "public" | "private"
	nat   natObservations
	// listening is closed once the host listens (New) or wraps a host
	// that does (NewFromHost): the first dials wait for it (bootstrapPeers).
	listening chan struct{}
	// lastVerdict is the reachability verdict last logged (string).
	lastVerdict atomic.Value
	events      eventHub
	scores      scoreBoard
	traffic     *traffic // stream bytes and gossip messages (traffic.go)

	closeOnce sync.Once
	closeErr  error
}

// New builds a libp2p host for the configured network and starts DHT,
// gossipsub, bootstrap and discovery. Bootstrap dialing happens in the
// background, so New returns as soon as the host listens.
func New(ctx context.Context, opts ...Option) (*Host, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	gater := newForeignGater()
	relays := &relayPeers{boot: cfg.bootstrap}
	lopts, err := libp2pOptions(cfg, gater, relays)
	if err != nil {
		return nil, err
	}
	tr := newTraffic(cfg.network)
	h, err := libp2p.New(append(lopts, libp2p.BandwidthReporter(tr.streams))...)
	if err != nil {
		return nil, err
	}
	relays.h.Store(&h)
	hh, err := newHost(ctx, h, cfg, gater, tr)
	if err != nil {
		return nil, err
	}
	// Listen only now, after every protocol handler is registered: a peer
	// that connects earlier would identify us without the hello protocol and
	// drop us as foreign.
	if err := h.Network().Listen(cfg.listen...); err != nil {
		hh.Close()
		return nil, err
	}
	close(hh.listening)
	return hh, nil
}

// NewFromHost wraps an existing host (for example a mocknet peer) with DHT,
// gossipsub and discovery. Options that shape the libp2p host itself
// (Identity, ListenAddrs, limits, NAT) are ignored. Host.Close closes h too.
func NewFromHost(ctx context.Context, h host.Host, opts ...Option) (*Host, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(h.Mux().Protocols(), ping.ID) {
		// libp2p.New answers pings, a bare (mocknet) host does not; the
		// renter measures each candidate's RTT by ping while it quotes.
		ping.NewPingService(h)
	}
	hh, err := newHost(ctx, h, cfg, nil, newTraffic(cfg.network))
	if err == nil {
		close(hh.listening)
		// A wrapped (mocknet) host has no NAT to cross: plain dials.
		hh.lh = relayedOK{Host: h, log: hh.log}
	}
	return hh, err
}

func libp2pOptions(cfg *config, gater *foreignGater, relays *relayPeers) ([]libp2p.Option, error) {
	// Without the metrics tracer: it cost 7% of a node's CPU in a burst of
	// auctions (issue 33's profile), for metrics nothing reads.
	limits := resourceLimits(cfg.maxMemory, cfg.maxFD, cfg.relayService)
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits), rcmgr.WithMetricsDisabled())
	if err != nil {
		return nil, err
	}
	// The grace period protects fresh connections while identify and the DHT
	// decide whether they are worth keeping.
	cm, err := connmgr.NewConnManager(cfg.connLow, connHighWater(cfg, limits), connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return nil, err
	}
	o := []libp2p.Option{
		libp2p.Identity(cfg.key),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(tls.ID, tls.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.ConnectionGater(gater),
		libp2p.Ping(true),
		libp2p.UserAgent("gleaner/" + cfg.network),
		// libp2p's own metrics fill Prometheus's default registry, which
		// the node never serves (its metrics listener has a registry of
		// its own), and cost CPU on every stream and connection.
		libp2p.DisableMetrics(),
	}
	if cfg.noNAT {
		o = append(o, libp2p.DisableRelay())
	} else {
		// NAT traversal (issue 37; nat.go, relay.go): every node answers
		// AutoNAT (libp2p stops serving once it learns it is private
		// itself), maps a port by UPnP/NAT-PMP when the router offers it,
		// punches holes (DCUtR), and, once AutoNAT says it is private,
		// reserves a slot on relays it picks among its peers.
		o = append(o, libp2p.EnableRelay(), libp2p.NATPortMap(), libp2p.EnableNATService(),
			libp2p.EnableHolePunching(), libp2p.EnableAutoNATv2(),
			libp2p.EnableAutoRelayWithPeerSource(relays.source, autoRelayOptions()...))
	}
	if cfg.relayService {
		o = append(o, libp2p.EnableRelayService(relayv2.WithResources(relayResources(cfg.circuitDuration, cfg.circuitData))), libp2p.EnableNATService())
	}
	return o, nil
}

// Per-peer shares of the resource manager's budget (issue 11: no peer can
// exhaust a node). libp2p's defaults grow a peer's share with the node's
// budget: at limits.max_memory_mb = 512 one peer may hold 320 inbound
// streams, 66 on each protocol, and 128 MiB, a fifth of what the whole
// node may use, so a handful of connections could crowd out every other.
// We cap the share instead:
//
//   - peerStreamsIn: inbound streams one peer may hold open, over all
//     protocols. An honest peer needs a few dozen at most: the DHT and
//     gossipsub keep one or two each, ledger sync at most 4 fetches, 4
//     heads exchanges and a push, a renter one job/2 stream per lease it
//     follows plus its quotes and awards in flight. 128 leaves room for a
//     busy renter; of the 240 hostile streams it admits about 125.
//   - protoPeerStreamsIn: inbound streams one peer may hold on any one
//     protocol that libp2p does not limit itself (our /gleaner/N/* stream
//     protocols and the DHT). 32 is eight times what ledger sync asks of
//     a peer and more leases than one renter holds on one machine, yet a
//     peer that opens hundreds of job/2 streams gets 32 of them.
//   - peer memory (peerMemoryFraction, minPeerMemory): what one peer's
//     connections may reserve, an eighth of the node's budget and at
//     least 32 MiB. What the resource manager counts is the muxer's
//     receive windows (yamux reserves 256 KiB per stream, and more as a
//     window grows towards 16 MiB, while the peer is under half its
//     limit), so at 512 MiB the 64 MiB cover every stream of
//     peerStreamsIn at its first window and a fast transfer on top.
//     Every frame a peer sends is reserved there too, before it is
//     allocated: ReadFrame for our own protocols, MeteredHost for
//     gossipsub's and bitswap's messages (framemem.go, meter.go).
//   - a peer's memory on one protocol: half its share, so that one
//     renter's two large starts (a 12 MiB job body each) fit at once,
//     while every other protocol keeps the other half.
//   - the node's memory (systemMemoryFraction): what all peers together
//     may make the node hold, half of limits.max_memory_mb; the other
//     half is the node's own work (its stores, the auction, the RPC).
//     libp2p's default scaling would allow 640 MiB at 512 MiB.
const (
	peerStreamsIn        = 128
	protoPeerStreamsIn   = 32
	peerMemoryFraction   = 8
	minPeerMemory        = 32 << 20
	systemMemoryFraction = 2
)

// resourceLimits is libp2p's default limits scaled to the node's budget,
// with its service limits, and our per-peer shares on top; a relay's
// connection limits are raised to hold its reservations (relayConns).
func resourceLimits(maxMemory int64, maxFD int, relay bool) rcmgr.ConcreteLimitConfig {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	scaled := limits.Scale(maxMemory, maxFD)
	peerMemory := max(maxMemory/peerMemoryFraction, minPeerMemory)
	system := rcmgr.ResourceLimits{Memory: rcmgr.LimitVal64(max(maxMemory/systemMemoryFraction, peerMemory))}
	if relay {
		sys := scaled.ToPartialLimitConfig().System
		in, all := relayConns(int(sys.ConnsInbound), int(sys.Conns), maxFD)
		system.ConnsInbound, system.Conns = rcmgr.LimitVal(in), rcmgr.LimitVal(all)
	}
	return rcmgr.PartialLimitConfig{
		System: system,
		PeerDefault: rcmgr.ResourceLimits{
			StreamsInbound: peerStreamsIn,
			Memory:         rcmgr.LimitVal64(peerMemory),
		},
		ProtocolPeerDefault: rcmgr.ResourceLimits{StreamsInbound: protoPeerStreamsIn, Memory: rcmgr.LimitVal64(peerMemory / 2)},
	}.Build(scaled)
}

func newHost(ctx context.Context, h host.Host, cfg *config, gater *foreignGater, tr *traffic) (hh *Host, err error) {
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	hh = &Host{cfg: cfg, h: h, log: cfg.log.With("network", cfg.network), gater: gater, ctx: hctx, cancel: cancel, listening: make(chan struct{})}
	hh.traffic, tr.gossip.self = tr, h.ID()
	hh.reach.Store("unknown")
	defer func() {
		if err != nil {
			hh.Close()
		}
	}()
	// The hello handler exists only to be advertised by identify; see
	// netcheck.go for why that is how networks are told apart.
	h.SetStreamHandler(hh.ProtocolID(helloName), func(s network.Stream) { _ = s.Close() })
	if err := hh.startEventLoop(); err != nil {
		return hh, err
	}
	// Metered: the DHT reads messages of up to 4 MiB, allocated at their
	// prefix; the metered host charges them to the peer first (meter.go).
	if hh.dht, err = dht.New(MeteredHost(h), dhtOptions(cfg, hh.bootstrapPeers)...); err != nil {
		return hh, err
	}
	hh.lh = relayedOK{Host: h, log: hh.log}
	if !cfg.noNAT {
		// Hosts without NAT traversal (in-process tests and benchmarks)
		// keep plain dials: nothing they dial sits behind a NAT.
		hh.lh = relayedOK{Host: routedhost.Wrap(h, hh.dht), find: hh.dht.FindPeer, log: hh.log}
	}
	if hh.ps, err = hh.newPubSub(); err != nil {
		return hh, err
	}
	if cfg.mdns {
		// The host does not listen yet (New listens last); the runner
		// starts mDNS when addresses appear rather than failing now.
		if err := hh.runMDNS(); err != nil {
			return hh, err
		}
	}
	hh.wg.Add(1)
	go hh.discoveryLoop()
	if !cfg.noNAT {
		hh.wg.Add(1)
		go hh.relayWatch()
	}
	return hh, nil
}

// bootstrapPeers is the DHT's bootstrap list, empty until the host
// listens: the DHT dials its bootstrap peers as soon as it starts, and a
// connection dialled before the listeners exist leaves from a throwaway
// port (QUIC: another UDP socket). Behind a NAT that connection, usually
// the one to the relay, would show the relay a mapping that neither hole
// punching nor the NAT check (nat.go) can use. The node's bootstrapper
// dials the same peers once New returns.
func (h *Host) bootstrapPeers() []peer.AddrInfo {
	select {
	case <-h.listening:
		return h.cfg.bootstrap
	default:
		return nil
	}
}

func dhtOptions(cfg *config, bootstrap func() []peer.AddrInfo) []dht.Option {
	// "auto" maps to ModeAutoServer: a young network without AutoNAT
	// servers never learns it is public, and a DHT of clients finds nothing.
	mode := dht.ModeAutoServer
	switch cfg.dhtMode {
	case "server":
		mode = dht.ModeServer
	case "client":
		mode = dht.ModeClient
	}
	return []dht.Option{
		dht.ProtocolPrefix(protocolPrefix(cfg.network)),
		dht.Mode(mode),
		dht.BootstrapPeersFunc(bootstrap),
	}
}

// ID is this node's peer ID.
func (h *Host) ID() peer.ID { return h.h.ID() }

// Network is the network name N.
func (h *Host) Network() string { return h.cfg.network }

// LibP2P exposes the underlying host for stream handlers. Its Connect and
// NewStream look a peer's addresses up in the DHT when the peerstore has
// none that work (a home provider's relayed addresses appear only once it
// holds a reservation), and NewStream also opens streams over a limited
// (relayed) connection when that is the only one to the peer: a provider
// behind a NAT that hole punching cannot cross is reached only so
// (relay.go).
func (h *Host) LibP2P() host.Host { return h.lh }

// DHT exposes the Kademlia DHT.
func (h *Host) DHT() *dht.IpfsDHT { return h.dht }

// PubSub exposes the gossipsub instance.
func (h *Host) PubSub() *pubsub.PubSub { return h.ps }

// Addrs returns the listen addresses with /p2p/<id> appended, ready to hand
// to another node as a bootstrap address.
func (h *Host) Addrs() []ma.Multiaddr {
	addrs, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: h.h.ID(), Addrs: h.h.Addrs()})
	if err != nil {
		return nil
	}
	return addrs
}

// Reachability is the verdict of NAT(): one of the Reach* constants
// (unknown, public, private, nat-holepunch, relayed).
func (h *Host) Reachability() string { return h.NAT().Verdict }

// Close stops discovery, the DHT, gossipsub and the libp2p host. It is
// idempotent and returns within closeTimeout even if a peer hangs.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.cancel() // stops pubsub, loops, peer-event subscriptions
		done := make(chan error, 1)
		go func() {
			var errs []error
			for _, c := range h.closer {
				errs = append(errs, c.Close())
			}
			if h.dht != nil {
				errs = append(errs, h.dht.Close())
			}
			errs = append(errs, h.h.Close())
			h.wg.Wait()
			h.events.close()
			done <- errors.Join(errs...)
		}()
		select {
		case h.closeErr = <-done:
		case <-time.After(closeTimeout):
			h.closeErr = errors.New("p2p: close timed out")
		}
	})
	return h.closeErr
}
