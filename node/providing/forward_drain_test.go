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

// A service job being stopped (preempted with notice, unpaid, at its
// lease's end) is drained: new streams are refused, so that its renter's
// gateway dials another replica, while the streams open carry on until
// the job's end (Remove) resets them. Real libp2p hosts; the container is
// an echo server on loopback.
func TestServiceDrainRefusesNewStreamsAndKeepsOpenOnes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	r := newServiceRig(t, ctx, DefaultForwardLimits())
	r.f.Add("job", r.renter.ID(), netip.MustParseAddrPort(ln.Addr().String()))
	open, err := r.dial(ctx, r.renter, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	echo := func(c network.Stream, msg string) error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != msg {
			return errors.New("echoed " + string(buf))
		}
		return nil
	}
	if err := echo(open, "before"); err != nil {
		t.Fatal(err)
	}

	r.f.Drain("job")
	var se *wire.ServiceError
	if _, err := r.dial(ctx, r.renter, "job"); !errors.As(err, &se) || se.Code != wire.ServiceRefused {
		t.Fatalf("a new stream to a drained job: %v, want refused", err)
	}
	if err := echo(open, "during the notice"); err != nil {
		t.Fatalf("the stream open before the drain: %v", err)
	}

	r.f.Remove("job")
	if err := echo(open, "after"); err == nil {
		t.Fatal("the stream open before the drain still carries bytes after Remove")
	}
}
