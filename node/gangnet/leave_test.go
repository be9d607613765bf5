package gangnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// openPair connects rank 0's process to rank 1's container through rank
// 0's listener and checks one round trip, so that both forwarded ends are
// open: the container's connection on provider 0 and the stream and
// container connection on provider 1.
func openPair(t *testing.T, peers []string, echo *echoContainer) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", peers[1], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintln(c, "ping"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("round trip: %q, %v", line, err)
	}
	waitFor(t, 5*time.Second, "the container's side to be counted", func() bool { return echo.conns() == 1 })
	return c
}

// Leave closes the member's listeners and cuts its open connections on
// both providers; streams for the gang are refused afterwards. The other
// member's provider, still joined, keeps its listener.
func TestGangLeaveTearsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rig := newGangRig(t, ctx, "leaving", 2, testLimits())
	ms, echo := rig.joinEcho(t)
	peers := ms[0].Peers()
	c := openPair(t, peers, echo)

	rig.provs[0].net.Leave("leaving")
	assertCut(t, c, "rank 0's process")
	waitFor(t, 5*time.Second, "rank 1's container connection to close", func() bool { return echo.conns() == 0 })
	if _, err := net.DialTimeout("tcp", peers[1], time.Second); err == nil {
		t.Fatal("rank 0's listener for rank 1 still accepts after Leave")
	}
	if st := rig.provs[0].net.Stats(); st.Gangs != 0 || st.Inbound != 0 {
		t.Fatalf("provider 0 after Leave: %+v", st)
	}
	_, err := rawStream(ctx, rig.provs[1].h, rig.provs[0].h.ID(), Header{Gang: "leaving", From: 1, To: 0, Lease: "lease1"})
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != CodeRefused {
		t.Fatalf("stream after Leave: %v, want %q", err, CodeRefused)
	}
	// Provider 1 still serves its member: its listener for rank 0 accepts
	// (and the connection is cut at once, since rank 0 left).
	if l, err := net.DialTimeout("tcp", ms[1].Peers()[0], time.Second); err != nil {
		t.Fatalf("rank 1's listener closed by rank 0's Leave: %v", err)
	} else {
		l.Close()
	}
	// Joining again after Leave works (a restarted member), and the old
	// membership's Leave does not end the new one.
	again, err := rig.provs[0].net.Join(Local{Roster: rig.roster, Rank: 0, Lease: leaseOf(0), ListenIP: loopback, Container: At(echo.addr)})
	if err != nil {
		t.Fatalf("join after leave: %v", err)
	}
	ms[0].Leave()
	if st := rig.provs[0].net.Stats(); st.Gangs != 1 {
		t.Fatalf("the old membership's Leave ended the new one: %+v", st)
	}
	c2, err := net.DialTimeout("tcp", again.Peers()[1], time.Second)
	if err != nil {
		t.Fatalf("the new membership's listener: %v", err)
	}
	c2.Close()
}

// Close does the same for every gang, and refuses Join afterwards.
func TestGangCloseTearsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rig := newGangRig(t, ctx, "closing", 2, testLimits())
	ms, echo := rig.joinEcho(t)
	peers := ms[0].Peers()
	c := openPair(t, peers, echo)

	// Provider 1 (the one whose container is reached) closes this time:
	// the inbound side's teardown.
	rig.provs[1].net.Close()
	assertCut(t, c, "rank 0's process")
	waitFor(t, 5*time.Second, "rank 1's container connection to close", func() bool { return echo.conns() == 0 })
	if _, err := net.DialTimeout("tcp", ms[1].Peers()[0], time.Second); err == nil {
		t.Fatal("rank 1's listener for rank 0 still accepts after Close")
	}
	if _, err := rig.provs[1].net.Join(Local{Roster: rig.roster, Rank: 1, Lease: leaseOf(1), ListenIP: loopback, Container: At(echo.addr)}); err == nil ||
		!strings.Contains(err.Error(), "closed") {
		t.Fatalf("join after Close: %v", err)
	}
}

// assertCut: c's next read ends (EOF or reset) well before the idle limit.
func assertCut(t *testing.T, c net.Conn, who string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("%s's connection not cut: %v", who, err)
	}
	if !errors.Is(err, io.EOF) {
		t.Logf("%s's connection cut: %v", who, err)
	}
}
