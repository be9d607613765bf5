package gangnet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/node/tunnel"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Limits bound every gang connection; tests shrink them. Everything about
// an inbound stream is the sending peer's to choose, and everything about
// a local connection the container's: the header's size and time, the
// bytes each way, the time a direction may stay idle, and how many
// streams a peer, or connections a listener, has open at once (memory is
// at most two copy buffers per connection).
type Limits struct {
	HeaderTimeout time.Duration // for the header to arrive and the reply to leave
	DialTimeout   time.Duration // for the container's gang port to accept, or a member's provider to open a stream
	Idle          time.Duration // a direction with no bytes for this long ends the connection
	MaxBytes      int64         // bytes each way per connection
	PerPeer       int           // inbound streams open at once per member's provider
	PerRank       int           // connections open at once through the listener for one rank
	PerGang       int           // connections open at once for one member, inbound and outbound together
	Buf           int           // each direction's copy buffer: memory is at most 2*Buf*PerGang per member
	RefusalEvery  time.Duration // refusals a peer may earn: one per RefusalEvery,
	RefusalBurst  int           // after a burst; beyond, streams are reset unanswered
}

// DefaultLimits: a training step's collective can leave a connection quiet
// for the length of an evaluation or a checkpoint, so Idle is long (gloo's
// own default timeout is 30 minutes). The bytes are the renter's own
// traffic between containers it leased, paid for by those leases, so
// MaxBytes is a guard against a runaway connection, not a quota: 4 TiB.
// Buffers are four times the service forward's, for bulk transfers
// (docs/PERFORMANCE.md); PerGang bounds what they cost: 64 MiB a member.
func DefaultLimits() Limits {
	return Limits{HeaderTimeout: 10 * time.Second, DialTimeout: 10 * time.Second, Idle: 30 * time.Minute,
		MaxBytes: 4 << 40, PerPeer: 64, PerRank: 64, PerGang: 256, Buf: 128 << 10,
		RefusalEvery: 6 * time.Second, RefusalBurst: 10}
}

// Net is one provider's side of every gang it runs a member of. The node
// registers Handle for /gleaner/N/gang/1 (Proto); the provider's gang
// start calls Join before the member's container starts and Leave when it
// ends.
type Net struct {
	host     *p2p.Host
	lim      Limits
	log      *slog.Logger
	refusals *tunnel.Refusals
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex // guards everything below, and every membership's conns and streams
	gangs   map[string]*Membership
	perPeer map[peer.ID]int
	closed  bool

	refused atomic.Int64 // refusals answered
	limited atomic.Int64 // refusals reset unanswered (rate limit)
}

// New serves no gang until Join. h opens the outbound streams.
func New(h *p2p.Host, lim Limits, log *slog.Logger) *Net {
	return &Net{host: h, lim: lim, log: log, refusals: tunnel.NewRefusals(lim.RefusalEvery, lim.RefusalBurst),
		dial: (&net.Dialer{}).DialContext, gangs: map[string]*Membership{}, perPeer: map[peer.ID]int{}}
}

// Stats is what the net counted.
type Stats struct {
	Gangs            int   // memberships joined
	Inbound          int   // inbound streams open
	Refused, Limited int64 // refusals answered; reset unanswered
}

func (n *Net) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	open := 0
	for _, c := range n.perPeer {
		open += c
	}
	return Stats{Gangs: len(n.gangs), Inbound: open, Refused: n.refused.Load(), Limited: n.limited.Load()}
}

// Close leaves every gang and refuses every stream from now on, so that
// the node's Stop does not wait on a long collective.
func (n *Net) Close() {
	n.mu.Lock()
	n.closed = true
	all := n.gangs
	n.gangs = map[string]*Membership{}
	n.mu.Unlock()
	for _, m := range all {
		m.teardown()
	}
}

// Leave ends the local member of gang: its listeners close, its open
// connections and streams are cut, and streams for it are refused from
// now on. Leaving a gang not joined does nothing.
func (n *Net) Leave(gang string) {
	n.mu.Lock()
	m := n.gangs[gang]
	delete(n.gangs, gang)
	n.mu.Unlock()
	if m != nil {
		m.teardown()
	}
}

// Handle serves an inbound gang stream: a member's provider connecting its
// container to the local member's gang port.
func (n *Net) Handle(s network.Stream) {
	from := s.Conn().RemotePeer()
	_ = s.SetDeadline(time.Now().Add(n.lim.HeaderTimeout))
	b, err := p2p.ReadFrame(s, MaxHeader)
	if err != nil {
		n.refuse(s, from, CodeMalformed, "no gang header: "+err.Error())
		return
	}
	h, err := DecodeHeader(b)
	if err != nil {
		n.refuse(s, from, CodeMalformed, err.Error())
		return
	}
	m, release, code, why := n.acquire(h, from, s)
	if code != "" {
		n.refuse(s, from, code, why)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), n.lim.DialTimeout)
	c, err := m.dialContainer(ctx, n.dial)
	cancel()
	if err != nil {
		// Answered without the refusal limit: a member retrying while
		// the container starts is no stranger knocking.
		n.refused.Add(1)
		n.answer(s, Reply{Code: CodeUnreachable, Error: fmt.Sprintf("rank %d's gang port is not answering: %v", m.rank, err)})
		return
	}
	if !m.track(c) {
		_ = c.Close()
		_ = s.Reset()
		return
	}
	defer m.untrack(c)
	if err := p2p.WriteJSON(s, Reply{}, MaxReply); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.SetDeadline(time.Time{})
	if err := tunnel.Join(s, c, n.tunnelLimits()); err != nil {
		n.log.Debug("gang stream cut", "gang", h.Gang, "from", h.From, "peer", from, "err", err)
	}
}

func (n *Net) tunnelLimits() tunnel.Limits {
	return tunnel.Limits{Idle: n.lim.Idle, MaxUp: n.lim.MaxBytes, MaxDown: n.lim.MaxBytes, Buf: n.lim.Buf}
}

// acquire checks h against the local roster and counts the stream against
// from's cap; release undoes it. code is "" when the stream may go on.
func (n *Net) acquire(h Header, from peer.ID, s network.Stream) (m *Membership, release func(), code, why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m = n.gangs[h.Gang]
	if n.closed || m == nil || !m.hasPeer(from) {
		// One answer for "no such gang" and "not a member": a stranger
		// learns nothing of which gangs run here.
		return nil, nil, CodeRefused, fmt.Sprintf("peer %s is not a member of a gang %q on this provider", from, h.Gang)
	}
	if h.To != m.rank || h.From >= len(m.members) || m.members[h.From].Peer != from || m.members[h.From].Lease != h.Lease {
		// A member, but its roster is not ours: say what differs, since
		// only a member reads this.
		return nil, nil, CodeRefused, fmt.Sprintf("gang %q: this provider runs rank %d and knows peer %s as rank %d, not a stream from rank %d (lease %s) to rank %d",
			h.Gang, m.rank, from, m.rankOf(from), h.From, h.Lease, h.To)
	}
	if n.perPeer[from] >= n.lim.PerPeer || m.open >= n.lim.PerGang {
		return nil, nil, CodeBusy, fmt.Sprintf("too many gang streams open from this peer or for rank %d (at most %d, %d)", m.rank, n.lim.PerPeer, n.lim.PerGang)
	}
	n.perPeer[from]++
	m.open++
	m.streams[s] = struct{}{}
	return m, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.perPeer[from]--; n.perPeer[from] <= 0 {
			delete(n.perPeer, from)
		}
		m.open--
		delete(m.streams, s)
	}, "", ""
}

// refuse answers a refusal unless from has earned too many lately: then
// the stream is reset unanswered.
func (n *Net) refuse(s network.Stream, from peer.ID, code, why string) {
	if !n.refusals.Allow(from) {
		n.limited.Add(1)
		_ = s.Reset()
		return
	}
	n.refused.Add(1)
	n.answer(s, Reply{Code: code, Error: why})
}

func (n *Net) answer(s network.Stream, r Reply) {
	if len(r.Error) > MaxReply/2 {
		r.Error = r.Error[:MaxReply/2]
	}
	_ = s.SetWriteDeadline(time.Now().Add(n.lim.HeaderTimeout))
	if err := p2p.WriteJSON(s, r, MaxReply); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}
