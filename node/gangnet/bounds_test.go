package gangnet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// A connection that stays quiet past Idle is cut; one that carries more
// than MaxBytes in a direction is cut there.
func TestGangConnectionBounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim := testLimits()
	lim.Idle, lim.MaxBytes = 300*time.Millisecond, 64<<10
	rig := newGangRig(t, ctx, "bounded", 2, lim)
	ms, echo := rig.joinEcho(t)
	peers := ms[0].Peers()

	quiet := openPair(t, peers, echo)
	t0 := time.Now()
	assertCut(t, quiet, "a quiet connection")
	if took := time.Since(t0); took < lim.Idle/2 {
		t.Fatalf("cut after %v, before the idle limit %v", took, lim.Idle)
	}

	big, err := net.DialTimeout("tcp", peers[1], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	go func() {
		// The echo sends back what arrives: both directions pass the limit.
		buf := make([]byte, 16<<10)
		for range 64 {
			if _, err := big.Write(buf); err != nil {
				return
			}
		}
	}()
	_ = big.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, big)
	if n > lim.MaxBytes {
		t.Fatalf("read %d bytes back through a limit of %d", n, lim.MaxBytes)
	}
	// Without the limit the 1 MiB comes back and the read waits for more
	// until its deadline.
	if nerr, ok := err.(net.Error); err == nil || ok && nerr.Timeout() {
		t.Fatalf("not cut at the byte limit: %d bytes, then %v", n, err)
	}
	t.Logf("cut after %d bytes back: %v", n, err)
}
