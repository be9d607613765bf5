package providing

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The forwarder's tests run real libp2p hosts on loopback: the service
// protocol is raw bytes over a stream, and its bounds (deadlines, resets,
// half-closes) are the stream's.

var quietLog = slog.New(slog.DiscardHandler)

// bareHost is a libp2p host of the local network, closed with the test.
func bareHost(t testing.TB, ctx context.Context) *p2p.Host {
	t.Helper()
	h, err := p2p.New(ctx, p2p.Network("local"), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// serviceRig is a provider host serving a forwarder with limits of the
// test's choosing, and a connected renter and stranger.
type serviceRig struct {
	f                      *Forwarder
	prov, renter, stranger *p2p.Host
}

func newServiceRig(t testing.TB, ctx context.Context, lim ForwardLimits) *serviceRig {
	r := &serviceRig{f: NewForwarder(lim, quietLog), prov: bareHost(t, ctx), renter: bareHost(t, ctx), stranger: bareHost(t, ctx)}
	t.Cleanup(r.f.Close)
	r.prov.LibP2P().SetStreamHandler(r.prov.ProtocolID(wire.ServiceProto), r.f.Handle)
	for _, h := range []*p2p.Host{r.renter, r.stranger} {
		if err := h.LibP2P().Connect(ctx, peer.AddrInfo{ID: r.prov.ID(), Addrs: r.prov.LibP2P().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// dial opens a service stream from h to job on the rig's provider, as the
// renter's node does (node's dialService): a *wire.ServiceError if the
// provider refused it.
func (r *serviceRig) dial(ctx context.Context, h *p2p.Host, job string) (network.Stream, error) {
	s, err := h.LibP2P().NewStream(ctx, r.prov.ID(), h.ProtocolID(wire.ServiceProto))
	if err != nil {
		return nil, err
	}
	_ = s.SetDeadline(time.Now().Add(15 * time.Second))
	if err := wire.OpenService(s, job); err != nil {
		_ = s.Reset()
		return nil, err
	}
	_ = s.SetDeadline(time.Time{})
	return s, nil
}

// testLimits are small enough to reach in a test.
func testLimits() ForwardLimits {
	l := DefaultForwardLimits()
	l.DialTimeout, l.Idle, l.MaxDown, l.PerPeer, l.PerJob = 500*time.Millisecond, 400*time.Millisecond, 1<<20, 2, 3
	return l
}

// tcpServer runs serve for every connection to a loopback listener.
func tcpServer(t *testing.T, serve func(net.Conn)) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return l.Addr().(*net.TCPAddr).AddrPort()
}

// waitFor polls cond until it holds or timeout passes: the forwarder
// counts a stream's end on its own goroutine, after the renter's close.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
