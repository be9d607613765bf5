package tunnel

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A peer gets its burst of refusals and then none until the rate refills;
// another peer's allowance is its own; and the limiters kept are bounded,
// so a stranger with endless identities cannot grow the map: past the
// bound, a new peer gets no answered refusal while every kept one is
// still spent.
func TestRefusalsBurstThenLimit(t *testing.T) {
	r := NewRefusals(time.Hour, 3)
	a, b := peer.ID("a"), peer.ID("b")
	for i := range 3 {
		if !r.Allow(a) {
			t.Fatalf("refusal %d of the burst not allowed", i+1)
		}
	}
	if r.Allow(a) {
		t.Fatal("a refusal past the burst allowed")
	}
	if !r.Allow(b) {
		t.Fatal("another peer's first refusal not allowed")
	}

	r = NewRefusals(time.Hour, 1)
	for i := range maxRefusalPeers {
		if !r.Allow(peer.ID(fmt.Sprint("p", i))) {
			t.Fatalf("peer %d's first refusal not allowed", i)
		}
	}
	if r.Allow("one-too-many") {
		t.Fatal("a peer past the bound allowed while every kept limiter is spent")
	}
	if len(r.m) > maxRefusalPeers {
		t.Fatalf("%d limiters kept, bound %d", len(r.m), maxRefusalPeers)
	}
}
