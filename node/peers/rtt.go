package peers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// Prober measures the round trip to any peer on demand: the renter's
// auctioneer before it ranks a provider (renter.Prober), and whatever must
// keep measuring a peer it depends on, such as a replica while it serves,
// by calling Measure periodically. It speaks libp2p's ping protocol, which
// every gleaner host answers (p2p enables it), so that providers need
// nothing new, and measures on the connection the exchange would use.
//
// A peer can answer late and look farther, which costs it only the job,
// but it cannot look closer than it is: each sample's 32 bytes come from
// crypto/rand, so nothing can be echoed before it arrives; the clock starts
// before they are written and stops once the whole echo is read; an echo
// that differs fails the measurement.
type Prober struct {
	h       host.Host
	samples int // round trips per measurement, of which the least counts
}

// DefaultRTTSamples: the first round trip of a fresh stream also carries
// the protocol negotiation, and any one can queue behind other traffic;
// the least of a few is the link's round trip, and each costs one more
// RTT. A liveness check that only asks whether the peer answers takes 1.
const DefaultRTTSamples = 3

// rttMaxWait bounds a measurement whose caller set no deadline.
const rttMaxWait = 10 * time.Second

// NewProber measures over h with samples round trips per measurement
// (DefaultRTTSamples where samples < 1).
func NewProber(h host.Host, samples int) *Prober {
	if samples < 1 {
		samples = DefaultRTTSamples
	}
	return &Prober{h: h, samples: samples}
}

// Measure returns the least of the prober's round trips to id on one ping
// stream, and records it in the peerstore's latency average (what node's
// peerRTT reads) so that the rest of the node learns from it too. It gives up when
// ctx ends, returning ctx's cause; samples taken by then still count. An
// echo that is not ours fails the whole measurement.
func (p *Prober) Measure(ctx context.Context, id peer.ID) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, rttMaxWait)
	defer cancel()
	s, err := p.h.NewStream(network.WithAllowLimitedConn(ctx, "rtt"), id, ping.ID)
	if err != nil {
		return 0, p.ctxErr(ctx, err)
	}
	// Reset, not Close: nothing more is to be said, and a peer that holds
	// the stream open must not hold our resources with it.
	defer s.Reset()
	// The context ends the stream, rather than a stream deadline racing
	// it, so that a cut-off measurement reports ctx's cause (the
	// auctioneer's "no answer in 500ms").
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	var best time.Duration
	for range p.samples {
		d, err := echoOnce(s)
		if errors.Is(err, errEchoMismatch) {
			return 0, err // a peer that answers what it was not sent is believed in nothing
		}
		if err != nil {
			if best > 0 {
				break
			}
			return 0, p.ctxErr(ctx, err)
		}
		if best == 0 || d < best {
			best = d
		}
	}
	p.h.Peerstore().RecordLatency(id, best)
	return best, nil
}

// MeasureRTT is Measure for the auctioneer, which names peers by string.
func (p *Prober) MeasureRTT(ctx context.Context, provider string) (time.Duration, error) {
	id, err := peer.Decode(provider)
	if err != nil {
		return 0, err
	}
	return p.Measure(ctx, id)
}

func (p *Prober) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

var errEchoMismatch = errors.New("rtt: the echo differs from what was sent")

// echoOnce times one ping: fresh random bytes out, the same bytes back.
func echoOnce(s network.Stream) (time.Duration, error) {
	var out, in [ping.PingSize]byte
	if _, err := rand.Read(out[:]); err != nil {
		return 0, err
	}
	start := time.Now() // before the write: the peer cannot have the bytes earlier
	if _, err := s.Write(out[:]); err != nil {
		return 0, fmt.Errorf("rtt: %w", err)
	}
	if _, err := io.ReadFull(s, in[:]); err != nil {
		return 0, fmt.Errorf("rtt: %w", err)
	}
	d := time.Since(start)
	if in != out {
		return 0, errEchoMismatch
	}
	return d, nil
}
