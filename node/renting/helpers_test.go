package renting

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// quietLog discards what the code under test logs.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// bareHost is a p2p host on loopback, on the local network, closed with
// the test.
func bareHost(t testing.TB, ctx context.Context) *p2p.Host {
	t.Helper()
	h, err := p2p.New(ctx, p2p.Network(repo.NetworkLocal), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// networkedJobs is a renter's job manager on a host of its own, with a
// node.db in a temporary directory and no auctioneer, and a second bare
// host connected to it: the provider's side, for the test to play.
func networkedJobs(t testing.TB, ctx context.Context) (r *Jobs, self, other *p2p.Host) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err = New(Deps{Bg: ctx, Store: st, Log: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	self, other = bareHost(t, ctx), bareHost(t, ctx)
	r.m = offers.NewMarket(self, 0, nil, quietLog)
	if err := other.LibP2P().Connect(ctx, peer.AddrInfo{ID: self.ID(), Addrs: self.LibP2P().Addrs()}); err != nil {
		t.Fatal(err)
	}
	return r, self, other
}
