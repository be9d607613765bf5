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
