package p2p

import (
	"context"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// TestResourceManagerKeepsNoMetrics: a host with NAT services (the path
// every public node takes) connects to another, and libp2p's resource
// manager has registered no metrics in Prometheus's default registry,
// which the node never serves: its tracer cost 7% of a node's CPU in a
// burst of auctions (issue 33).
func TestResourceManagerKeepsNoMetrics(t *testing.T) {
	h, err := New(context.Background(), Network("metrics-test"), ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")),
		DHTMode("server"), Logger(quietLog), DiscoveryInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	other := newTestHost(t, "metrics-test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.LibP2P().Connect(ctx, info(other)); err != nil {
		t.Fatal(err)
	}
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "libp2p_rcmgr") {
			t.Errorf("the resource manager keeps metrics: %s", f.GetName())
		}
	}
}
