package p2p

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNetworkNameValidation(t *testing.T) {
	for name, ok := range map[string]bool{
		"local": true, "testnet": true, "a": true, "0-x": true, strings.Repeat("a", 32): true,
		"": false, "-a": false, "Local": false, "a_b": false, "a/b": false, strings.Repeat("a", 33): false,
	} {
		_, err := New(context.Background(), Network(name), DisableNATServices(), Logger(quietLog))
		if ok && errors.Is(err, ErrBadNetwork) || !ok && !errors.Is(err, ErrBadNetwork) {
			t.Errorf("Network(%q): err=%v, want ok=%v", name, err, ok)
		}
	}
	if _, err := New(context.Background(), DisableNATServices()); !errors.Is(err, ErrBadNetwork) {
		t.Errorf("missing Network: err=%v", err)
	}
}

func TestNamesCarryNetwork(t *testing.T) {
	h := newTestHost(t, "local")
	if got := h.ProtocolID("job/1"); got != "/gleaner/local/job/1" {
		t.Errorf("ProtocolID = %s", got)
	}
	if got := h.TopicName("ledger/1"); got != "/gleaner/local/ledger/1" {
		t.Errorf("TopicName = %s", got)
	}
	if h.Network() != "local" || h.Reachability() != "unknown" {
		t.Errorf("Network=%s Reachability=%s", h.Network(), h.Reachability())
	}
	c := h.CapabilityCID("gpu", "H100")
	if c.Version() != 1 || c.Type() != 0x55 || c == h.CapabilityCID("gpu", "A100") {
		t.Errorf("CapabilityCID = %s", c)
	}
	if !strings.HasSuffix(h.Addrs()[0].String(), "/p2p/"+h.ID().String()) {
		t.Errorf("Addrs lack /p2p: %v", h.Addrs())
	}
}

func TestPingDisconnectPeerEvents(t *testing.T) {
	a, b := newTestHost(t, "local"), newTestHost(t, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	evs, err := a.SubscribePeerEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Disconnect(b.ID()); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Disconnect before connect: %v", err)
	}
	if err := b.Connect(ctx, info(a)); err != nil {
		t.Fatal(err)
	}
	want := func(typ string) PeerEvent {
		for {
			select {
			case e := <-evs:
				if e.Peer == b.ID() && e.Type == typ {
					return e
				}
			case <-ctx.Done():
				t.Fatalf("no %s event", typ)
			}
		}
	}
	if e := want("connected"); e.Addr == nil || e.Time.IsZero() {
		t.Errorf("connected event lacks addr/time: %+v", e)
	}
	rtt, err := a.Ping(ctx, b.ID())
	if err != nil || rtt <= 0 || rtt > 5*time.Second {
		t.Fatalf("Ping = %v, %v", rtt, err)
	}
	ps := a.Peers()
	i := slices.IndexFunc(ps, func(p PeerInfo) bool { return p.ID == b.ID() })
	if i < 0 || ps[i].Direction != "inbound" || ps[i].Transport != "tcp" || len(ps[i].Addrs) == 0 {
		t.Fatalf("Peers() = %+v", ps)
	}
	if err := a.Disconnect(b.ID()); err != nil {
		t.Fatal(err)
	}
	want("disconnected")
	cancel()
	for range evs { // channel must close once ctx is done
	}
}

func TestCloseIdempotentAndBounded(t *testing.T) {
	a, b := newTestHost(t, "local"), newTestHost(t, "local")
	if err := a.Connect(context.Background(), info(b)); err != nil {
		t.Fatal(err)
	}
	evs, _ := a.SubscribePeerEvents(context.Background())
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v", d)
	}
	for range evs { // closed by Close
	}
}

// Nodes of different networks must not stay connected, share a DHT
// routing table or gossip, even when dialed explicitly.
func TestNetworksIsolated(t *testing.T) {
	a, b := newTestHost(t, "a"), newTestHost(t, "b")
	a2 := newTestHost(t, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Connect(ctx, info(b)); !errors.Is(err, ErrForeignPeer) {
		t.Fatalf("Connect a->b: %v, want ErrForeignPeer", err)
	}
	// b dials a with the raw host, bypassing our Connect: identify-based
	// checks on both ends must still drop the connection.
	_ = b.LibP2P().Connect(ctx, info(a2))
	if err := a.Connect(ctx, info(a2)); err != nil {
		t.Fatalf("same-network connect: %v", err)
	}
	eventually(t, 10*time.Second, "foreign peers disconnected", func() bool {
		return !connected(a, b) && !connected(b, a) && !connected(a2, b) && !connected(b, a2)
	})
	for _, h := range []*Host{a, a2} {
		if h.DHT().RoutingTable().Find(b.ID()) != "" {
			t.Errorf("%s has foreign peer in routing table", h.ID())
		}
	}
	if b.DHT().RoutingTable().Size() != 0 {
		t.Errorf("b routing table has %d peers", b.DHT().RoutingTable().Size())
	}
	time.Sleep(500 * time.Millisecond)
	if !connected(a, a2) {
		t.Error("same-network peers got disconnected")
	}
}
