package p2p

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	ma "github.com/multiformats/go-multiaddr"
)

// newMockHosts builds n unlinked mocknet peers with Ed25519 keys (the key
// type real nodes use) wrapped by NewFromHost. The caller links them.
func newMockHosts(t testing.TB, n int, latency time.Duration, opts ...Option) (mocknet.Mocknet, []*Host) {
	t.Helper()
	mn := mocknet.New()
	mn.SetLinkDefaults(mocknet.LinkOptions{Latency: latency})
	hosts := make([]*Host, n)
	for i := range hosts {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		addr := ma.StringCast(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4242", i>>16&255, i>>8&255, i&255+1))
		lh, err := mn.AddPeer(k, addr)
		if err != nil {
			t.Fatal(err)
		}
		base := []Option{Network("mock"), DHTMode("server"), Logger(quietLog), DiscoveryInterval(0)}
		if hosts[i], err = NewFromHost(context.Background(), lh, append(base, opts...)...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, h := range hosts {
			_ = h.Close()
		}
		_ = mn.Close()
	})
	return mn, hosts
}

// A mocknet host answers pings once wrapped, as a libp2p.New host does:
// renters measure each candidate's RTT by ping while they quote, and a
// simulated-latency cluster must measure its links, not fail every ping.
func TestMockHostsAnswerPings(t *testing.T) {
	const link = 15 * time.Millisecond
	mn, hosts := newMockHosts(t, 2, link)
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := <-ping.Ping(ctx, hosts[0].h, hosts[1].ID())
	if r.Error != nil {
		t.Fatalf("ping over mocknet: %v", r.Error)
	}
	if r.RTT < 2*link {
		t.Fatalf("ping RTT %v over a %v one-way link: want at least %v", r.RTT, link, 2*link)
	}
}
