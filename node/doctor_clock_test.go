package node

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/repo"
)

// TestDoctorClockServedWithoutRPC: the clock protocol is served as soon as
// the host is, not only once the RPC API is registered.
func TestDoctorClockServedWithoutRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.P2P.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.P2P.MDNS, cfg.P2P.NATTraversal, cfg.P2P.DHTMode = false, false, "server"
	rp, err := repo.InitRepo(filepath.Join(t.TempDir(), "node"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(rp, cfg, Options{InProcess: true, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.startHost(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.host.Close() })
	h := hostileHost(t, ctx, n)
	if s, err := h.Clock(ctx, n.Host().ID()); err != nil || s.RTT <= 0 {
		t.Fatalf("clock of a node with only its host started: %+v, %v", s, err)
	}
}
