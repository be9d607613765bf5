package data

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"
)

// TestExchangeFetchOverRelay: a peer that listens nowhere (a home behind
// a NAT) holds a slot on a relay; a fetcher reaches it only through a
// circuit, a limited connection bitswap would keep off by itself. The
// fetch goes over the circuit (issue 37: a job's data crosses a relay
// when nothing else joins a renter and its provider).
func TestExchangeFetchOverRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	relayHost := newHost(t, libp2p.EnableRelay())
	r, err := relayv2.New(relayHost, relayv2.WithResources(p2p.RelayResources()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	relayInfo := peer.AddrInfo{ID: relayHost.ID(), Addrs: relayHost.Addrs()}

	homeHost, err := libp2p.New(libp2p.NoListenAddrs, libp2p.EnableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = homeHost.Close() })
	if err := homeHost.Connect(ctx, relayInfo); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Reserve(ctx, homeHost, relayInfo); err != nil {
		t.Fatalf("reserve a slot on the relay: %v", err)
	}
	home := newXNodeOn(t, homeHost)
	fetcher := newXNodeOn(t, newHost(t, libp2p.EnableRelay()))

	circuit := ma.StringCast(relayHost.Addrs()[0].String() + "/p2p/" + relayHost.ID().String() + "/p2p-circuit")
	if err := fetcher.h.Connect(network.WithAllowLimitedConn(ctx, "test"), peer.AddrInfo{ID: homeHost.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatalf("connect through the relay: %v", err)
	}
	src := testTree(t)
	root, err := home.s.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fetcher.x.Fetch(fetchCtx(t, 20*time.Second), root, nil)
	if err != nil {
		t.Fatalf("fetch through the relay: %v", err)
	}
	if res.Peers != 1 || res.Blocks < 9 {
		t.Fatalf("result %+v", res)
	}
	sameTree(t, fetcher.s, root, src)
	for _, c := range fetcher.h.Network().ConnsToPeer(homeHost.ID()) {
		if !c.Stat().Limited {
			t.Errorf("a direct connection to the home peer (%s): the test proves nothing about relays", c.RemoteMultiaddr())
		}
	}
}

// newXNodeOn is newXNode on a host made by the caller.
func newXNodeOn(t *testing.T, h host.Host) *xnode {
	t.Helper()
	n := &xnode{t: t, h: h, dir: filepath.Join(t.TempDir(), "blocks"), logs: &syncBuffer{}}
	n.s = openStore(t, n.dir, 64<<20)
	n.start(testPrefix)
	t.Cleanup(n.stop)
	return n
}
