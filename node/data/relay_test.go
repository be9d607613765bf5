package data

import (
	"context"
	"path/filepath"
	"sync/atomic"
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

// relayedPair is a home peer that listens nowhere (behind a NAT) and
// holds a slot on a relay granting res, and a fetcher connected to it
// only through a circuit: a limited connection, which bitswap would keep
// off by itself. resets counts the fetcher's connections to home that
// ended (each circuit the relay reset).
type relayedPair struct {
	home, fetcher *xnode
	resets        *atomic.Int32
}

func newRelayedPair(t testing.TB, res relayv2.Resources) relayedPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	relayHost := newHost(t, libp2p.EnableRelay())
	r, err := relayv2.New(relayHost, relayv2.WithResources(res))
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
	p := relayedPair{home: newXNodeOn(t, homeHost), resets: &atomic.Int32{}}
	// The fetcher listens nowhere either (a home too): the home peer
	// cannot dial it back directly when a circuit ends.
	fh, err := libp2p.New(libp2p.NoListenAddrs, libp2p.EnableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fh.Close() })
	if err := fh.Connect(ctx, relayInfo); err != nil {
		t.Fatal(err)
	}
	fh.Network().Notify(&network.NotifyBundle{DisconnectedF: func(_ network.Network, c network.Conn) {
		if c.RemotePeer() == homeHost.ID() {
			p.resets.Add(1)
		}
	}})
	p.fetcher = newXNodeOn(t, fh)
	circuit := ma.StringCast(relayHost.Addrs()[0].String() + "/p2p/" + relayHost.ID().String() + "/p2p-circuit")
	if err := fh.Connect(network.WithAllowLimitedConn(ctx, "test"), peer.AddrInfo{ID: homeHost.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatalf("connect through the relay: %v", err)
	}
	return p
}

// onlyRelayed fails the test if the fetcher holds a direct connection to
// the home peer: then it would prove nothing about relays.
func (p relayedPair) onlyRelayed(t *testing.T) {
	t.Helper()
	for _, c := range p.fetcher.h.Network().ConnsToPeer(p.home.h.ID()) {
		if !c.Stat().Limited {
			t.Errorf("a direct connection to the home peer (%s)", c.RemoteMultiaddr())
		}
	}
}

// TestExchangeFetchOverRelay: the fetch goes over the circuit (issue 37:
// a job's data crosses a relay when nothing else joins a renter and its
// provider).
func TestExchangeFetchOverRelay(t *testing.T) {
	p := newRelayedPair(t, p2p.RelayResources())
	src := testTree(t)
	root, err := p.home.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.fetcher.x.Fetch(fetchCtx(t, 20*time.Second), root, nil)
	if err != nil {
		t.Fatalf("fetch through the relay: %v", err)
	}
	if res.Peers != 1 || res.Blocks < 9 {
		t.Fatalf("result %+v", res)
	}
	sameTree(t, p.fetcher.s, root, src)
	p.onlyRelayed(t)
}

// TestExchangeFetchOutgrowsACircuit: a DAG larger than what one circuit
// may carry (the relay's data limit, 64 MiB in production, 1 MiB here:
// more than one bitswap message, which holds at most two 256 KiB blocks)
// is fetched all the same: the relay resets the circuit at its limit,
// bitswap dials the peer through the relay again, and the fetch goes on
// from the blocks it has.
func TestExchangeFetchOutgrowsACircuit(t *testing.T) {
	res := p2p.RelayResources()
	res.Limit.Data = 1 << 20
	p := newRelayedPair(t, res)
	src := testTree(t) // 1.9 MB
	root, err := p.home.s.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.fetcher.x.Fetch(fetchCtx(t, 30*time.Second), root, nil); err != nil {
		t.Fatalf("fetch of 1.9 MB through circuits of 1 MiB: %v (%d circuits reset)", err, p.resets.Load())
	}
	sameTree(t, p.fetcher.s, root, src)
	if p.resets.Load() == 0 {
		t.Error("no circuit was reset: the data limit was not met, and the test proves nothing")
	}
	p.onlyRelayed(t)
}

// newXNodeOn is newXNode on a host made by the caller.
func newXNodeOn(t testing.TB, h host.Host) *xnode {
	t.Helper()
	n := &xnode{t: t, h: h, dir: filepath.Join(t.TempDir(), "blocks"), logs: &syncBuffer{}}
	n.s = openStore(t, n.dir, 64<<20)
	n.start(testPrefix)
	t.Cleanup(n.stop)
	return n
}
