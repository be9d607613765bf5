package p2p

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"golang.org/x/time/rate"
)

// clockPair is two connected real hosts; a serves the clock protocol with
// a clock skewed by skew, and with the default rate limits unless unlimited.
func clockPair(t *testing.T, skew time.Duration, unlimited bool) (a, b *Host) {
	t.Helper()
	a, b = newTestHost(t, "local"), newTestHost(t, "local")
	srv := newClockServer(func() time.Time { return time.Now().Add(skew) })
	if unlimited {
		// Without this the hostile frames below would be refused by the
		// rate limiter before the handler read them.
		srv.perPeer, srv.burst = rate.Inf, 1
	}
	a.serveClockWith(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Connect(ctx, info(a)); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func TestClockMeasuresSkew(t *testing.T) {
	for _, skew := range []time.Duration{0, 5 * time.Second, -90 * time.Second} {
		a, b := clockPair(t, skew, false)
		s, err := b.Clock(context.Background(), a.ID())
		if err != nil {
			t.Fatalf("skew %v: %v", skew, err)
		}
		// The true skew lies within RTT/2 of the estimate; allow a
		// millisecond more for the clock reads around it.
		if d := (s.Skew - skew).Abs(); d > s.RTT/2+time.Millisecond || s.RTT <= 0 || s.Peer != a.ID() {
			t.Errorf("skew %v: measured %v (rtt %v, peer %s)", skew, s.Skew, s.RTT, s.Peer)
		}
	}
}

func TestClockUnsupportedAndUnconnected(t *testing.T) {
	a, b := newTestHost(t, "local"), newTestHost(t, "local") // a does not serve
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Clock(ctx, a.ID()); err == nil {
		t.Fatal("Clock of an unconnected peer succeeded; it must not dial")
	}
	if err := b.Connect(ctx, info(a)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Clock(ctx, a.ID()); err == nil {
		t.Fatal("Clock of a peer without the protocol succeeded")
	}
}

func frameOf(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// rawClock opens a clock stream from b to a and writes raw bytes; it
// returns what a sent back before closing or resetting.
func rawClock(t *testing.T, a, b *Host, send []byte) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := b.LibP2P().NewStream(ctx, a.ID(), a.ProtocolID(clockName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(2 * clockDeadline))
	if len(send) > 0 {
		if _, err := s.Write(send); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(s)
}

func TestClockHandlerRefusesHostileFrames(t *testing.T) {
	a, b := clockPair(t, 0, true)
	big := make([]byte, 4096)
	for i := range big {
		big[i] = 'x'
	}
	for name, send := range map[string][]byte{
		"oversized length": {0x80, 0x80, 0x40},                 // declares 1 MiB
		"oversized body":   append([]byte{0x80, 0x20}, big...), // 4096 > clockMaxFrame
		"garbage":          frameOf("\x00\xff{]!"),             // not JSON
		"unknown field":    frameOf(`{"nonce":1,"x":2}`),
		"trailing data":    frameOf(`{"nonce":1}{}`),
		"wrong type":       frameOf(`{"nonce":"1"}`),
		"truncated":        frameOf(`{"nonce":1}`)[:5],
	} {
		got, err := rawClock(t, a, b, send)
		if len(got) != 0 {
			t.Errorf("%s: the handler answered %q", name, got)
		}
		if err == nil {
			t.Errorf("%s: the stream ended cleanly; want a reset", name)
		}
	}
	// A peer that opens a stream and says nothing is cut at the deadline.
	start := time.Now()
	got, err := rawClock(t, a, b, nil)
	if len(got) != 0 || err == nil || time.Since(start) > clockDeadline+time.Second {
		t.Errorf("silent peer: got %q, err %v after %v; want a reset within %v", got, err, time.Since(start), clockDeadline)
	}
	// The frames are refused by validation: a well-formed one is answered.
	got, err = rawClock(t, a, b, frameOf(`{"nonce":7}`))
	var ans clockAnswer
	if err != nil || len(got) < 2 || DecodeJSON(got[1:], &ans) != nil || ans.Nonce != 7 {
		t.Errorf("honest request after the hostile ones: %q, %v", got, err)
	}
}

func TestClockRateLimit(t *testing.T) {
	a, b := clockPair(t, 0, false)
	ok := 0
	for range clockPeerBurst + 3 {
		if _, err := b.Clock(context.Background(), a.ID()); err == nil {
			ok++
		}
	}
	if ok != clockPeerBurst {
		t.Fatalf("%d of %d back-to-back requests answered; want the burst, %d", ok, clockPeerBurst+3, clockPeerBurst)
	}
}

// A hostile answerer: Clock rejects an answer to another nonce, a time
// before 1970 and an oversized frame.
func TestClockRejectsHostileAnswers(t *testing.T) {
	a, b := newTestHost(t, "local"), newTestHost(t, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Connect(ctx, info(a)); err != nil {
		t.Fatal(err)
	}
	answers := []func(s network.Stream, req clockRequest){
		func(s network.Stream, req clockRequest) {
			_ = WriteJSON(s, clockAnswer{Nonce: req.Nonce + 1, TimeNS: time.Now().UnixNano()}, clockMaxFrame)
		},
		func(s network.Stream, req clockRequest) {
			_ = WriteJSON(s, clockAnswer{Nonce: req.Nonce, TimeNS: -5}, clockMaxFrame)
		},
		func(s network.Stream, req clockRequest) { _ = WriteFrame(s, make([]byte, 1000), 1000) },
	}
	for i, answer := range answers {
		a.LibP2P().SetStreamHandler(a.ProtocolID(clockName), func(s network.Stream) {
			defer s.Close()
			var req clockRequest
			if ReadJSON(s, clockMaxFrame, &req) == nil {
				answer(s, req)
			}
		})
		if _, err := b.Clock(ctx, a.ID()); !errors.Is(err, ErrClockRefused) {
			t.Errorf("hostile answer %d: err %v, want ErrClockRefused", i, err)
		}
	}
}

func TestSampleOfMidpoint(t *testing.T) {
	t0 := time.Unix(1000, 0)
	t1 := t0.Add(200 * time.Millisecond)
	s := sampleOf("", t0, t1, t0.Add(100*time.Millisecond+3*time.Second).UnixNano())
	if s.Skew != 3*time.Second || s.RTT != 200*time.Millisecond {
		t.Fatalf("skew %v rtt %v, want 3s and 200ms", s.Skew, s.RTT)
	}
}
