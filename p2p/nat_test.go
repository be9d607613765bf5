package p2p

import (
	"strconv"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"
)

// fakeConn is the two addresses natObservations reads of a connection.
type fakeConn struct {
	network.Conn
	local, remote ma.Multiaddr
}

func (c fakeConn) LocalMultiaddr() ma.Multiaddr  { return c.local }
func (c fakeConn) RemoteMultiaddr() ma.Multiaddr { return c.remote }

func observe(o *natObservations, local, remote, observed string) {
	o.record(fakeConn{local: ma.StringCast(local), remote: ma.StringCast(remote)}, ma.StringCast(observed))
}

func TestNATMapping(t *testing.T) {
	const quic = "/ip4/0.0.0.0/udp/4001/quic-v1"
	for _, tc := range []struct {
		name      string
		obs       [][3]string // local, remote, observed
		want      string
		observers int
	}{
		{"nothing seen", nil, mappingUnknown, 0},
		{"one observer decides nothing", [][3]string{
			{quic, "/ip4/11.77.0.10/udp/4001/quic-v1", "/ip4/11.77.0.101/udp/4001/quic-v1"},
		}, mappingUnknown, 1},
		{"two observers agree: endpoint-independent", [][3]string{
			{quic, "/ip4/11.77.0.10/udp/4001/quic-v1", "/ip4/11.77.0.101/udp/4001/quic-v1"},
			{quic, "/ip4/11.77.0.11/udp/4001/quic-v1", "/ip4/11.77.0.101/udp/4001/quic-v1"},
		}, mappingIndependent, 2},
		{"two observers disagree: symmetric", [][3]string{
			{quic, "/ip4/11.77.0.10/udp/4001/quic-v1", "/ip4/11.77.0.102/udp/33953/quic-v1"},
			{quic, "/ip4/11.77.0.11/udp/4001/quic-v1", "/ip4/11.77.0.102/udp/51623/quic-v1"},
		}, mappingDependent, 2},
		{"observers of different sockets decide nothing", [][3]string{
			{quic, "/ip4/11.77.0.10/udp/4001/quic-v1", "/ip4/11.77.0.101/udp/4001/quic-v1"},
			{"/ip4/0.0.0.0/tcp/4001", "/ip4/11.77.0.11/tcp/4001", "/ip4/11.77.0.101/tcp/4001"},
		}, mappingUnknown, 2},
		{"LAN and relayed observers do not count", [][3]string{
			{quic, "/ip4/192.168.1.9/udp/4001/quic-v1", "/ip4/192.168.1.2/udp/4001/quic-v1"},
			{quic, "/ip4/11.77.0.10/udp/4001/quic-v1/p2p/12D3KooWD71stqnZ6rdsBLUB8nsT5KDXkBqRyDaazRjE4xKSagQz/p2p-circuit", "/ip4/11.77.0.101/udp/7/quic-v1"},
			{quic, "/ip4/11.77.0.11/udp/4001/quic-v1", "/ip4/11.77.0.101/udp/4001/quic-v1"},
		}, mappingUnknown, 1},
		{"seen at our own address: no NAT", [][3]string{
			{quic, "/ip4/11.77.0.10/udp/4001/quic-v1", "/ip4/127.0.0.1/udp/4001/quic-v1"},
		}, mappingNone, 1},
	} {
		var o natObservations
		for _, x := range tc.obs {
			observe(&o, x[0], x[1], x[2])
		}
		if got, n := o.mapping(); got != tc.want || n != tc.observers {
			t.Errorf("%s: mapping %s over %d observers, want %s over %d", tc.name, got, n, tc.want, tc.observers)
		}
	}
}

func TestNATObservationsBounded(t *testing.T) {
	var o natObservations
	for port := 1; port <= 3*natMaxLocal; port++ {
		for ip := 1; ip <= 3*natMaxObservers; ip++ {
			observe(&o, "/ip4/0.0.0.0/udp/"+itoa(port)+"/quic-v1", "/ip4/11.0.0."+itoa(ip)+"/udp/1/quic-v1", "/ip4/11.77.0.1/udp/9/quic-v1")
		}
	}
	if len(o.seen) > natMaxLocal {
		t.Errorf("%d sockets kept, bound %d", len(o.seen), natMaxLocal)
	}
	for k, m := range o.seen {
		if len(m) > natMaxObservers {
			t.Errorf("%s: %d observers kept, bound %d", k, len(m), natMaxObservers)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestVerdict(t *testing.T) {
	for _, tc := range []struct{ autonat, mapping, want string }{
		{"unknown", mappingIndependent, ReachUnknown},
		{"public", mappingDependent, ReachPublic},
		{"private", mappingIndependent, ReachHolePunch},
		{"private", mappingDependent, ReachRelayed},
		{"private", mappingUnknown, ReachPrivate},
		{"private", mappingNone, ReachPrivate},
	} {
		if got := verdict(tc.autonat, tc.mapping); got != tc.want {
			t.Errorf("verdict(%s, %s) = %s, want %s", tc.autonat, tc.mapping, got, tc.want)
		}
		if m, _ := ReachabilityMeaning(tc.want); m == "" {
			t.Errorf("%s has no meaning", tc.want)
		}
	}
}
