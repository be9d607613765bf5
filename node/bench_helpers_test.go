package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Shared scaffolding for node's tests and benchmarks; the offer
// benchmarks' clusters live with them in node/offers.

var quietLog = slog.New(slog.DiscardHandler)

func addrInfo(h *p2p.Host) peer.AddrInfo {
	return peer.AddrInfo{ID: h.ID(), Addrs: h.LibP2P().Addrs()}
}

// waitNothingLeft polls left every 100 ms until it says nothing is left
// ("") or timeout passes, then fails naming what was left.
func waitNothingLeft(t testing.TB, timeout time.Duration, what string, left func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l := left()
		if l == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s:%s", timeout, what, l)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(b testing.TB, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
