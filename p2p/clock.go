package p2p

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// The clock protocol, /gleaner/N/clock/1, tells a node how far a peer's
// clock is from its own. Signed objects (offers, leases, vouchers) carry
// expiries, so a node whose clock is off by minutes sees valid objects as
// expired or accepts stale ones; `gleaner doctor` reports the skew.
//
// One exchange per stream: the asker sends one frame {"nonce":N}, the
// peer answers one frame {"nonce":N,"time_ns":T} and closes. Both frames
// are a few dozen bytes, so clockMaxFrame caps them far below
// DefaultMaxFrame, and the handler reads nothing else.

const clockName = "clock/1"

const (
	// clockMaxFrame bounds both frames: {"nonce":18446744073709551615,
	// "time_ns":9223372036854775807} is 58 bytes.
	clockMaxFrame = 96
	// clockDeadline bounds a whole exchange, on either side: a peer that
	// sends half a frame and stalls holds a stream this long at most.
	clockDeadline = 2 * time.Second
	// A peer may ask clockPeerBurst times at once and then once per
	// clockPeerEvery; doctor asks each peer once.
	clockPeerEvery = time.Second
	clockPeerBurst = 3
	// The node answers at most clockGlobalRate exchanges a second from
	// all peers together, so many identities cannot add up to a flood.
	clockGlobalRate  = 50
	clockGlobalBurst = 100
	// clockMaxLimiters bounds the per-peer table; past it the table is
	// cleared (a fresh bucket is full, so clearing only forgives).
	clockMaxLimiters = 1024
)

// ErrClockRefused means the peer answered the clock protocol with
// something other than a valid answer to our request.
var ErrClockRefused = errors.New("p2p: bad clock answer")

type clockRequest struct {
	Nonce uint64 `json:"nonce"`
}

type clockAnswer struct {
	Nonce  uint64 `json:"nonce"`
	TimeNS int64  `json:"time_ns"`
}

// ClockSample is one measurement of a peer's clock.
type ClockSample struct {
	Peer peer.ID
	// Skew is the peer's clock minus ours: its answer against the
	// midpoint of our send and receive. The true skew lies within RTT/2.
	Skew time.Duration
	RTT  time.Duration
}

// clockServer answers clock requests, rate limited per peer and overall.
type clockServer struct {
	now     func() time.Time
	global  *rate.Limiter
	perPeer rate.Limit
	burst   int

	mu    sync.Mutex // guards peers
	peers map[peer.ID]*rate.Limiter
}

func newClockServer(now func() time.Time) *clockServer {
	return &clockServer{
		now:     now,
		global:  rate.NewLimiter(clockGlobalRate, clockGlobalBurst),
		perPeer: rate.Every(clockPeerEvery),
		burst:   clockPeerBurst,
		peers:   make(map[peer.ID]*rate.Limiter),
	}
}

func (c *clockServer) allow(p peer.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.peers[p]
	if !ok {
		if len(c.peers) >= clockMaxLimiters {
			clear(c.peers)
		}
		l = rate.NewLimiter(c.perPeer, c.burst)
		c.peers[p] = l
	}
	return l.Allow() && c.global.Allow()
}

// handle serves one exchange. Anything but one well-formed request within
// the deadline resets the stream without an answer.
func (c *clockServer) handle(s network.Stream) {
	if !c.allow(s.Conn().RemotePeer()) {
		_ = s.Reset()
		return
	}
	_ = s.SetDeadline(time.Now().Add(clockDeadline))
	var req clockRequest
	if err := ReadJSON(s, clockMaxFrame, &req); err != nil {
		_ = s.Reset()
		return
	}
	ans := clockAnswer{Nonce: req.Nonce, TimeNS: c.now().UnixNano()}
	if err := WriteJSON(s, ans, clockMaxFrame); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}

// ServeClock starts answering the clock protocol. The node calls it once,
// where it builds the host, beside its other stream handlers; hosts that
// never call it (tests, tools) answer "protocol not supported".
func (h *Host) ServeClock() {
	h.serveClockWith(newClockServer(time.Now))
}

func (h *Host) serveClockWith(c *clockServer) {
	h.h.SetStreamHandler(h.ProtocolID(clockName), c.handle)
}

// Clock measures peer p's clock over an existing connection (it never
// dials: a skew is only worth asking of a peer we already talk to).
func (h *Host) Clock(ctx context.Context, p peer.ID) (ClockSample, error) {
	ctx, cancel := context.WithTimeout(ctx, clockDeadline)
	defer cancel()
	s, err := h.h.NewStream(network.WithNoDial(ctx, "clock of a connected peer"), p, h.ProtocolID(clockName))
	if err != nil {
		return ClockSample{}, err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	nonce := binary.LittleEndian.Uint64(nb[:])

	t0 := time.Now()
	if err := WriteJSON(s, clockRequest{Nonce: nonce}, clockMaxFrame); err != nil {
		_ = s.Reset()
		return ClockSample{}, err
	}
	var ans clockAnswer
	if err := ReadJSON(s, clockMaxFrame, &ans); err != nil {
		_ = s.Reset()
		return ClockSample{}, fmt.Errorf("%w: %v", ErrClockRefused, err)
	}
	t1 := time.Now()
	if ans.Nonce != nonce {
		return ClockSample{}, fmt.Errorf("%w: it answered another request", ErrClockRefused)
	}
	if ans.TimeNS <= 0 {
		return ClockSample{}, fmt.Errorf("%w: time %d is not after 1970", ErrClockRefused, ans.TimeNS)
	}
	return sampleOf(p, t0, t1, ans.TimeNS), nil
}

// sampleOf is the skew of a peer that said peerNS between t0 and t1, our
// send and receive: the answer is compared with the midpoint, which is
// right when both legs take equally long and off by at most RTT/2.
func sampleOf(p peer.ID, t0, t1 time.Time, peerNS int64) ClockSample {
	rtt := t1.Sub(t0) // monotonic
	mid := t0.Add(rtt / 2).Round(0)
	return ClockSample{Peer: p, Skew: time.Unix(0, peerNS).Sub(mid), RTT: rtt}
}
