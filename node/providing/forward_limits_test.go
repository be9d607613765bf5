package providing

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
)

// A port nobody listens on fails with "unreachable" at once. (An address
// that never answers is cut by DialTimeout; this machine's outbound TCP
// is answered by a proxy, so no black hole is at hand to test it.)
func TestServiceForwardUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newServiceRig(t, ctx, testLimits())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).AddrPort()
	l.Close() // nothing listens there now: the dial is refused at once
	for name, addr := range map[string]netip.AddrPort{
		"closed port": closed,
	} {
		r.f.Add("job1", r.renter.ID(), addr)
		t0 := time.Now()
		_, err := r.dial(ctx, r.renter, "job1")
		took := time.Since(t0)
		t.Logf("%s: %v after %v", name, err, took)
		var se *wire.ServiceError
		if !errors.As(err, &se) || se.Code != wire.ServiceUnreachable || took > testLimits().DialTimeout+time.Second {
			t.Fatalf("%s: %v after %v", name, err, took)
		}
	}
}

// An endless response is cut at the byte limit; a silent one at the idle
// timeout; a request that never ends at its own limit.
func TestServiceForwardBounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim := testLimits()
	lim.MaxUp = 256 << 10
	r := newServiceRig(t, ctx, lim)

	endless := tcpServer(t, func(c net.Conn) {
		buf := make([]byte, 16<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	r.f.Add("endless", r.renter.ID(), endless)
	c, err := r.dial(ctx, r.renter, "endless")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, c)
	c.Close()
	if err == nil || n > lim.MaxDown {
		t.Fatalf("endless response: read %d bytes (limit %d), err %v", n, lim.MaxDown, err)
	}
	t.Logf("endless response cut after %d bytes: %v", n, err)

	silent := tcpServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	r.f.Add("silent", r.renter.ID(), silent)
	c, err = r.dial(ctx, r.renter, "silent")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = c.Read(make([]byte, 1))
	if took := time.Since(t0); err == nil || took > lim.Idle+2*time.Second {
		t.Fatalf("silent service: read returned %v after %v (idle %v)", err, took, lim.Idle)
	}
	c.Close()

	// The request side: more than MaxUp from the renter.
	c, err = r.dial(ctx, r.renter, "silent")
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 32<<10)
	var sent int64
	for ; sent < 4*lim.MaxUp; sent += int64(len(chunk)) {
		if _, err = c.Write(chunk); err != nil {
			break
		}
	}
	c.Close()
	if err == nil {
		t.Fatalf("wrote %d bytes upstream past the %d limit without an error", sent, lim.MaxUp)
	}
}

// Open streams are capped per renter peer: the third is answered busy,
// and one closing makes room again.
func TestServiceForwardCaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim := testLimits()
	lim.Idle = 10 * time.Second
	r := newServiceRig(t, ctx, lim)
	hold := tcpServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	r.f.Add("hold", r.renter.ID(), hold)
	var open []network.Stream
	for range lim.PerPeer {
		c, err := r.dial(ctx, r.renter, "hold")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	_, err := r.dial(ctx, r.renter, "hold")
	var se *wire.ServiceError
	if !errors.As(err, &se) || se.Code != wire.ServiceBusy {
		t.Fatalf("stream past the cap: %v", err)
	}
	open[0].Close()
	waitFor(t, 5*time.Second, "a closed stream's slot", func() bool { return r.f.Stats().Open < lim.PerPeer })
	c, err := r.dial(ctx, r.renter, "hold")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, c := range open[1:] {
		c.Close()
	}
	waitFor(t, 5*time.Second, "the closed streams' slots", func() bool { return r.f.Stats().Open == 0 })
	// Remove resets what is open.
	c, err = r.dial(ctx, r.renter, "hold")
	if err != nil {
		t.Fatal(err)
	}
	r.f.Remove("hold")
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a stream of a removed service still reads")
	}
}
