package providing

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/node/tunnel"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The provider's side of reaching a service job (docs/SERVICES.md,
// "Reaching a service's container"): the job's container listens on a
// network only this daemon reaches (executor/service_net.go), and its
// renter reaches it through /gleaner/N/service/1 (node/wire/service.go).
// A stream carries one header frame (the job), one reply frame (empty,
// or an error), then raw bytes both ways to the container's port: one TCP connection per stream,
// so an HTTP client above it sees an ordinary connection.
//
// Everything about a stream is the peer's to choose and so bounded: the
// header's size and the time it takes to arrive, the bytes each way, the
// time a direction may stay idle, how many streams a peer and a job have
// open at once (so memory is at most two copy buffers per stream, and
// streams per peer are capped), and how often a peer may be refused
// before it is reset without an answer.

// ForwardLimits bound every stream; tests shrink them.
type ForwardLimits struct {
	HeaderTimeout time.Duration // for the header to arrive and the reply to leave
	DialTimeout   time.Duration // for the container's port to accept
	Idle          time.Duration // a direction with no bytes for this long ends the stream
	MaxUp         int64         // bytes from the renter to the container, per stream
	MaxDown       int64         // bytes from the container to the renter, per stream
	PerPeer       int           // streams open at once per renter peer
	PerJob        int           // streams open at once per job
	RefusalEvery  time.Duration // refusals a peer may earn: one per RefusalEvery,
	RefusalBurst  int           // after a burst; beyond, streams are reset unanswered
}

// DefaultForwardLimits: an inference response streams tokens for minutes
// but is rarely past tens of MiB; a pause of two minutes without a token
// is a hung replica.
func DefaultForwardLimits() ForwardLimits {
	return ForwardLimits{HeaderTimeout: 10 * time.Second, DialTimeout: 3 * time.Second, Idle: 2 * time.Minute,
		MaxUp: 64 << 20, MaxDown: 256 << 20, PerPeer: 64, PerJob: 64, RefusalEvery: 6 * time.Second, RefusalBurst: 10}
}

type serviceTarget struct {
	renter peer.ID
	addr   netip.AddrPort
}

// Forwarder serves /gleaner/N/service/1 (wire.ServiceProto): the node
// registers Handle for it, and the provider hands it each service job as
// it runs (Config.OnService, OnServiceDrain, OnServiceEnd).
type Forwarder struct {
	lim  ForwardLimits
	log  *slog.Logger
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex // guards everything below
	targets map[string]serviceTarget
	perPeer map[peer.ID]int
	perJob  map[string]int
	streams map[string]map[network.Stream]struct{} // open streams by job, reset by Remove and Close
	closed  bool

	refusals *tunnel.Refusals

	refused atomic.Int64 // refusals answered
	limited atomic.Int64 // refusals reset unanswered (rate limit)
}

// NewForwarder serves nothing until Add.
func NewForwarder(lim ForwardLimits, log *slog.Logger) *Forwarder {
	return &Forwarder{lim: lim, log: log, dial: (&net.Dialer{}).DialContext,
		targets: map[string]serviceTarget{}, perPeer: map[peer.ID]int{}, perJob: map[string]int{},
		streams:  map[string]map[network.Stream]struct{}{},
		refusals: tunnel.NewRefusals(lim.RefusalEvery, lim.RefusalBurst)}
}

// Add serves jobID's container at addr to renter alone, replacing what
// was served for jobID before.
func (f *Forwarder) Add(jobID string, renter peer.ID, addr netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets[jobID] = serviceTarget{renter: renter, addr: addr}
}

// Drain refuses new streams to jobID from now on, as if it were not
// served, and lets those open run on until Remove: the job is being
// stopped (with its lease's notice) or has exited.
func (f *Forwarder) Drain(jobID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.targets, jobID)
}

// Remove stops serving jobID and resets its open streams: the job ended.
func (f *Forwarder) Remove(jobID string) {
	f.mu.Lock()
	delete(f.targets, jobID)
	open := f.streams[jobID]
	delete(f.streams, jobID)
	f.mu.Unlock()
	for s := range open {
		_ = s.Reset()
	}
}

// Close refuses every stream from now on and resets the open ones, so that
// the node's Stop does not wait on a renter's long response.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	all := f.streams
	f.streams = map[string]map[network.Stream]struct{}{}
	f.mu.Unlock()
	for _, open := range all {
		for s := range open {
			_ = s.Reset()
		}
	}
}

// ForwardStats is what the forwarder counted.
type ForwardStats struct {
	Open             int
	Refused, Limited int64
}

func (f *Forwarder) Stats() ForwardStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	open := 0
	for _, n := range f.perPeer {
		open += n
	}
	return ForwardStats{Open: open, Refused: f.refused.Load(), Limited: f.limited.Load()}
}

func (f *Forwarder) Handle(s network.Stream) {
	from := s.Conn().RemotePeer()
	_ = s.SetDeadline(time.Now().Add(f.lim.HeaderTimeout))
	b, err := p2p.ReadFrame(s, wire.MaxServiceHeader)
	if err != nil {
		f.refuse(s, from, wire.ServiceMalformed, "no service header: "+err.Error())
		return
	}
	h, err := wire.DecodeServiceHeader(b)
	if err != nil {
		f.refuse(s, from, wire.ServiceMalformed, err.Error())
		return
	}
	t, release, code := f.acquire(h.Job, from, s)
	switch code {
	case wire.ServiceRefused:
		// One answer for "no such job" and "not yours": a stranger learns
		// nothing of which jobs run here.
		f.refuse(s, from, code, fmt.Sprintf("peer %s is not the renter of a service job %q on this provider", from, h.Job))
		return
	case wire.ServiceBusy:
		f.answer(s, wire.ServiceReply{Code: code, Error: fmt.Sprintf("too many streams open for job %q or this peer (at most %d, %d)", h.Job, f.lim.PerJob, f.lim.PerPeer)})
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), f.lim.DialTimeout)
	c, err := f.dial(ctx, "tcp", t.addr.String())
	cancel()
	if err != nil {
		f.answer(s, wire.ServiceReply{Code: wire.ServiceUnreachable, Error: "the service's port is not answering: " + err.Error()})
		return
	}
	defer c.Close()
	if err := p2p.WriteJSON(s, wire.ServiceReply{}, wire.MaxServiceReply); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.SetDeadline(time.Time{})
	if err := tunnel.Join(s, c.(*net.TCPConn), tunnel.Limits{Idle: f.lim.Idle, MaxUp: f.lim.MaxUp, MaxDown: f.lim.MaxDown}); err != nil {
		f.log.Debug("service stream cut", "job", h.Job, "peer", from, "err", err)
	}
}

// acquire finds jobID's target for from and counts the stream against the
// caps; release undoes it. code is "" when the stream may go on.
func (f *Forwarder) acquire(jobID string, from peer.ID, s network.Stream) (t serviceTarget, release func(), code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.targets[jobID]
	switch {
	case f.closed || !ok || t.renter != from:
		return t, nil, wire.ServiceRefused
	case f.perPeer[from] >= f.lim.PerPeer || f.perJob[jobID] >= f.lim.PerJob:
		return t, nil, wire.ServiceBusy
	}
	f.perPeer[from]++
	f.perJob[jobID]++
	if f.streams[jobID] == nil {
		f.streams[jobID] = map[network.Stream]struct{}{}
	}
	f.streams[jobID][s] = struct{}{}
	return t, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.perPeer[from]--; f.perPeer[from] <= 0 {
			delete(f.perPeer, from)
		}
		if f.perJob[jobID]--; f.perJob[jobID] <= 0 {
			delete(f.perJob, jobID)
		}
		if open := f.streams[jobID]; open != nil {
			delete(open, s)
			if len(open) == 0 {
				delete(f.streams, jobID)
			}
		}
	}, ""
}

// refuse answers a refusal unless from has earned too many lately: then
// the stream is reset unanswered, which costs this node no more than the
// header's read.
func (f *Forwarder) refuse(s network.Stream, from peer.ID, code, why string) {
	if !f.refusals.Allow(from) {
		f.limited.Add(1)
		_ = s.Reset()
		return
	}
	f.refused.Add(1)
	f.answer(s, wire.ServiceReply{Code: code, Error: why})
}

func (f *Forwarder) answer(s network.Stream, r wire.ServiceReply) {
	if len(r.Error) > wire.MaxServiceReply/2 {
		r.Error = r.Error[:wire.MaxServiceReply/2]
	}
	_ = s.SetWriteDeadline(time.Now().Add(f.lim.HeaderTimeout))
	if err := p2p.WriteJSON(s, r, wire.MaxServiceReply); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}
