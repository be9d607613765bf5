package gangnet

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// A container that opens more connections than PerRank to one rank has
// the extra ones closed at once; once one ends, the next is carried. And
// PerGang counts both directions: with the one outbound connection open,
// an inbound stream for the member is told busy.
func TestGangConnectionCaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim := testLimits()
	lim.PerRank, lim.PerGang = 1, 1
	rig := newGangRig(t, ctx, "caps", 2, lim)
	ms, echo := rig.joinEcho(t)
	peers := ms[0].Peers()
	first := openPair(t, peers, echo)

	extra, err := net.DialTimeout("tcp", peers[1], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	assertCut(t, extra, "the connection past PerRank")
	extra.Close()

	_, err = rawStream(ctx, rig.provs[1].h, rig.provs[0].h.ID(), Header{Gang: "caps", From: 1, To: 0, Lease: "lease1"})
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != CodeBusy {
		t.Fatalf("inbound stream past PerGang: %v, want %q", err, CodeBusy)
	}

	first.Close()
	waitFor(t, 5*time.Second, "the first connection's end to be counted", func() bool { return echo.conns() == 0 })
	waitFor(t, 5*time.Second, "rank 0's count to drop", func() bool {
		rig.provs[0].net.mu.Lock()
		defer rig.provs[0].net.mu.Unlock()
		return ms[0].open == 0
	})
	openPair(t, peers, echo)
}
