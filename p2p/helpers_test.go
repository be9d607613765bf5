package p2p

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTestHost starts a loopback TCP host in lightweight mode. Discovery
// dialing is off unless the caller turns it on, so topologies stay as built.
func newTestHost(t testing.TB, network string, opts ...Option) *Host {
	t.Helper()
	base := []Option{
		Network(network),
		ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")),
		DisableNATServices(),
		DHTMode("server"),
		Logger(quietLog),
		DiscoveryInterval(0),
	}
	h, err := New(context.Background(), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func info(h *Host) peer.AddrInfo {
	return peer.AddrInfo{ID: h.ID(), Addrs: h.LibP2P().Addrs()}
}

// eventually polls cond until it holds or the timeout expires.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func connected(a, b *Host) bool {
	return len(a.LibP2P().Network().ConnsToPeer(b.ID())) > 0
}
