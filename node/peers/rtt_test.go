package peers

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// The prober against real libp2p hosts on loopback: plain ones (the ping
// service libp2p.New enables, no DHT, so nothing else records latency),
// and ones whose ping handler a test replaces with a hostile peer's.

func pingPair(t *testing.T) (from, to host.Host) {
	t.Helper()
	mk := func() host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	from, to = mk(), mk()
	if err := from.Connect(context.Background(), peer.AddrInfo{ID: to.ID(), Addrs: to.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return from, to
}

// On loopback the measured round trip is real and small, and it lands in
// the peerstore's average, which knew nothing of the peer before.
func TestRTTProberMeasuresLoopbackAndRecordsIt(t *testing.T) {
	from, to := pingPair(t)
	if d := from.Peerstore().LatencyEWMA(to.ID()); d != 0 {
		t.Fatalf("the peerstore knew %v before any ping; the test cannot tell a recording", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := NewProber(from, 0).Measure(ctx, to.ID())
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 || d >= 50*time.Millisecond {
		t.Errorf("loopback RTT %v, want in (0, 50ms)", d)
	}
	if got := from.Peerstore().LatencyEWMA(to.ID()); got != d {
		t.Errorf("peerstore average %v after the first measurement, want %v", got, d)
	}
}

// A peer that delays its echo looks as far as the delay, never less.
func TestRTTProberSeesADelayedEcho(t *testing.T) {
	from, to := pingPair(t)
	const delay = 80 * time.Millisecond
	to.SetStreamHandler(ping.ID, func(s network.Stream) {
		defer s.Close()
		buf := make([]byte, ping.PingSize)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			time.Sleep(delay)
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := NewProber(from, 0).Measure(ctx, to.ID())
	if err != nil {
		t.Fatal(err)
	}
	if d < delay || d > delay+200*time.Millisecond {
		t.Errorf("RTT %v through an echo delayed %v", d, delay)
	}
}

// A hostile peer cannot look closer: bytes sent before ours arrived (a
// guess, or a replay of an earlier ping) do not match and fail the
// measurement, and so does any echo that is not ours; a peer that never
// answers fails it at the deadline, with the deadline's cause.
func TestRTTProberRefusesEchoesThatAreNotOurs(t *testing.T) {
	for _, c := range []struct {
		name    string
		handler network.StreamHandler
		want    error
	}{
		{"answers before reading", func(s network.Stream) {
			_, _ = s.Write(make([]byte, ping.PingSize)) // at once, a guess of all zeroes
			_, _ = io.Copy(io.Discard, s)
		}, errEchoMismatch},
		{"replays the first ping", func(s network.Stream) {
			first := make([]byte, ping.PingSize)
			if _, err := io.ReadFull(s, first); err != nil {
				return
			}
			_, _ = s.Write(first)
			buf := make([]byte, ping.PingSize)
			for {
				_, _ = s.Write(first) // ahead of the next ping, which it cannot know
				if _, err := io.ReadFull(s, buf); err != nil {
					return
				}
			}
		}, errEchoMismatch},
		{"flips a bit", func(s network.Stream) {
			buf := make([]byte, ping.PingSize)
			if _, err := io.ReadFull(s, buf); err == nil {
				buf[0] ^= 1
				_, _ = s.Write(buf)
			}
			_, _ = io.Copy(io.Discard, s)
		}, errEchoMismatch},
		{"never answers", func(s network.Stream) { _, _ = io.Copy(io.Discard, s) }, errNoEcho},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, to := pingPair(t)
			to.SetStreamHandler(ping.ID, c.handler)
			ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, errNoEcho)
			defer cancel()
			d, err := NewProber(from, 0).Measure(ctx, to.ID())
			if !errors.Is(err, c.want) {
				t.Fatalf("measured %v, err %v; want %v", d, err, c.want)
			}
			if got := from.Peerstore().LatencyEWMA(to.ID()); got != 0 {
				t.Errorf("a failed measurement recorded %v", got)
			}
		})
	}
}

var errNoEcho = errors.New("no echo in the test's deadline")

// A peer that does not speak the ping protocol fails at once, without
// waiting out the deadline.
func TestRTTProberFailsFastWithoutPing(t *testing.T) {
	from, to := pingPair(t)
	to.RemoveStreamHandler(ping.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	if _, err := NewProber(from, 0).Measure(ctx, to.ID()); err == nil {
		t.Fatal("measured a peer without a ping handler")
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("took %v to fail", took)
	}
}
