package gangnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/node/tunnel"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Local is what the provider's gang start knows of its own member.
type Local struct {
	Roster Roster
	Rank   int // the local member's rank; the roster must name this provider there
	// Lease is the CID of the lease under which this provider runs the
	// member; the roster must name it at Rank, so that a roster from
	// someone other than the lease's renter, or for another lease, is not
	// joined. Required.
	Lease string
	// ListenIP is where the container reaches this daemon: 127.0.0.1 for
	// the process executor; for Docker, the host's address on the
	// container's network. One listener per other rank, on a free port.
	ListenIP netip.Addr
	// Self is how the container reaches its own gang port, its entry in
	// GLEANER_GANG_PEERS; zero means 127.0.0.1 and the roster's port.
	Self netip.AddrPort
	// Container says where this daemon connects an inbound stream to the
	// container's gang port. It is asked at each stream, since a
	// container's address is known only once it runs; until then its
	// error refuses the stream as unreachable (a rendezvous retries).
	Container func(ctx context.Context) (netip.AddrPort, error)
	// InContainer: the container has a network namespace of its own
	// (Docker's, with no network but its loopback), which exists only once
	// it runs, after its environment was set. Join then opens nothing and
	// gives every rank a fixed entry on the container's loopback (its own
	// gang port for itself, Port+1+k for rank k); Membership.Open makes
	// the listeners there, and the dials to the gang port, once the
	// container runs. ListenIP, Self and Container are not used.
	InContainer bool
}

// Opener makes sockets where a container's processes are: inside its
// network namespace (netns_linux.go).
type Opener interface {
	Listen(addr string) (net.Listener, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// ProcessLocal is the Local of a member that the process executor runs:
// the job is a process on this host, listening on 127.0.0.1 at the
// roster's port, and it reaches the listeners on 127.0.0.1 too.
func ProcessLocal(r Roster, rank int, lease string) Local {
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	self := netip.AddrPortFrom(lo, uint16(r.port()))
	return Local{Roster: r, Rank: rank, Lease: lease, ListenIP: lo, Self: self, Container: At(self)}
}

// At is a Local.Container for an address known in advance.
func At(a netip.AddrPort) func(context.Context) (netip.AddrPort, error) {
	return func(context.Context) (netip.AddrPort, error) { return a, nil }
}

// Environment variables a member's container gets (Membership.Env).
const (
	EnvGang  = "GLEANER_GANG_ID"
	EnvRank  = "GLEANER_GANG_RANK"
	EnvSize  = "GLEANER_GANG_SIZE"
	EnvPeers = "GLEANER_GANG_PEERS" // host:port per rank, in rank order, comma-separated
)

// Membership is the local member of one gang: its listeners, and the
// connections and streams open for it.
type Membership struct {
	n         *Net
	gang      string
	rank      int
	members   []Member // by rank
	peers     []string // GLEANER_GANG_PEERS, by rank
	listeners []net.Listener
	container func(context.Context) (netip.AddrPort, error)
	loops     sync.WaitGroup
	// inContainer: Local.InContainer; opener is set by Open (under n.mu).
	inContainer bool
	opener      Opener

	// guarded by n.mu
	left    bool
	open    int   // connections, inbound and outbound (Limits.PerGang)
	perRank []int // outbound connections by rank (Limits.PerRank)
	conns   map[*net.TCPConn]struct{}
	streams map[network.Stream]struct{}
}

// ErrAlreadyJoined: a member of the gang is joined on this provider, and
// a provider holds one member of a gang at a time. A member of the
// gang's last placement that is ending leaves soon; any other is a
// second start.
var ErrAlreadyJoined = errors.New("already joined on this provider")

// Join starts forwarding for the local member of l.Roster: call it before
// the member's container starts, and give the container Env (through the
// executor's Spec.Provided). It fails for an invalid roster, a roster
// that does not name this provider at l.Rank, a gang already joined, or a
// listener that cannot be opened.
func (n *Net) Join(l Local) (*Membership, error) {
	r := l.Roster
	if err := r.Validate(); err != nil {
		return nil, err
	}
	members := r.byRank()
	switch {
	case l.Rank < 0 || l.Rank >= r.Size:
		return nil, fmt.Errorf("gang %q: local rank %d outside 0..%d", r.Gang, l.Rank, r.Size-1)
	case members[l.Rank].Peer != n.host.ID():
		return nil, fmt.Errorf("gang %q: the roster names %s at rank %d, not this provider", r.Gang, members[l.Rank].Peer, l.Rank)
	case members[l.Rank].Lease != l.Lease:
		return nil, fmt.Errorf("gang %q: the roster names lease %q at rank %d, not this member's %q", r.Gang, members[l.Rank].Lease, l.Rank, l.Lease)
	case l.InContainer && r.port()+r.Size > 65535:
		return nil, fmt.Errorf("gang %q: gang port %d leaves no room for %d ranks' ports above it", r.Gang, r.port(), r.Size)
	case l.InContainer:
	case !l.ListenIP.IsValid():
		return nil, fmt.Errorf("gang %q: no listen address for the container", r.Gang)
	case l.Container == nil:
		return nil, fmt.Errorf("gang %q: no way to reach the container's gang port", r.Gang)
	}
	if l.InContainer {
		return n.joinInContainer(r, l.Rank, members)
	}
	self := l.Self
	if !self.IsValid() {
		self = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(r.port()))
	}
	m := &Membership{n: n, gang: r.Gang, rank: l.Rank, members: members, container: l.Container,
		peers: make([]string, r.Size), listeners: make([]net.Listener, r.Size), perRank: make([]int, r.Size),
		conns: map[*net.TCPConn]struct{}{}, streams: map[network.Stream]struct{}{}}
	for k := range members {
		if k == l.Rank {
			m.peers[k] = self.String()
			continue
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(l.ListenIP, 0).String())
		if err != nil {
			m.closeListeners()
			return nil, fmt.Errorf("gang %q: listen for rank %d on %s: %w", r.Gang, k, l.ListenIP, err)
		}
		m.listeners[k] = ln
		m.peers[k] = ln.Addr().String()
	}
	n.mu.Lock()
	if n.closed || n.gangs[r.Gang] != nil {
		closed := n.closed
		n.mu.Unlock()
		m.closeListeners()
		if closed {
			return nil, fmt.Errorf("gang %q: the gang network is closed", r.Gang)
		}
		return nil, fmt.Errorf("gang %q: %w", r.Gang, ErrAlreadyJoined)
	}
	n.gangs[r.Gang] = m
	n.mu.Unlock()
	for k, ln := range m.listeners {
		if ln != nil {
			m.loops.Add(1)
			go m.accept(k, ln)
		}
	}
	return m, nil
}

// Rank is the local member's rank.
func (m *Membership) Rank() int { return m.rank }

// Peers is GLEANER_GANG_PEERS as a list: host:port per rank, in rank
// order; the local rank's entry is the container's own gang port.
func (m *Membership) Peers() []string { return append([]string(nil), m.peers...) }

// Env is the container's gang environment, for the executor's
// Spec.Provided.
func (m *Membership) Env() map[string]string {
	return map[string]string{
		EnvGang:  m.gang,
		EnvRank:  strconv.Itoa(m.rank),
		EnvSize:  strconv.Itoa(len(m.members)),
		EnvPeers: strings.Join(m.peers, ","),
	}
}

// Leave is Net.Leave for this member alone: once its gang was joined
// again (a restarted member), the old Membership's Leave leaves the new
// one alone.
func (m *Membership) Leave() {
	m.n.mu.Lock()
	if m.n.gangs[m.gang] == m {
		delete(m.n.gangs, m.gang)
	}
	m.n.mu.Unlock()
	m.teardown()
}

func (m *Membership) hasPeer(p peer.ID) bool { return m.rankOf(p) >= 0 }

func (m *Membership) rankOf(p peer.ID) int {
	for k, mem := range m.members {
		if mem.Peer == p {
			return k
		}
	}
	return -1
}

func (m *Membership) closeListeners() {
	for _, ln := range m.listeners {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// teardown closes the listeners and cuts every connection and stream;
// the caller has taken m out of its Net.
func (m *Membership) teardown() {
	m.n.mu.Lock()
	m.left = true
	conns, streams := m.conns, m.streams
	m.conns, m.streams = map[*net.TCPConn]struct{}{}, map[network.Stream]struct{}{}
	m.n.mu.Unlock()
	m.closeListeners()
	for c := range conns {
		_ = c.Close()
	}
	for s := range streams {
		_ = s.Reset()
	}
	m.loops.Wait()
}

// track counts c among m's connections, unless m has left.
func (m *Membership) track(c *net.TCPConn) bool {
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	if m.left {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *Membership) untrack(c *net.TCPConn) {
	m.n.mu.Lock()
	delete(m.conns, c)
	m.n.mu.Unlock()
}

// dialContainer connects to the local container's gang port.
func (m *Membership) dialContainer(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error)) (*net.TCPConn, error) {
	if m.inContainer {
		o := m.openerNow()
		if o == nil {
			return nil, errors.New("the member's container is not running yet")
		}
		dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return o.Dial(ctx, addr) }
	}
	a, err := m.container(ctx)
	if err != nil {
		return nil, err
	}
	c, err := dial(ctx, "tcp", a.String())
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		_ = c.Close()
		return nil, fmt.Errorf("gang port %s: not a TCP connection", a)
	}
	return tc, nil
}

// accept forwards each connection the container makes to rank k's
// listener, while m is joined.
func (m *Membership) accept(k int, ln net.Listener) {
	defer m.loops.Done()
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of descriptors, say: not the container's fault alone
			time.Sleep(50 * time.Millisecond)
			continue
		}
		tc := c.(*net.TCPConn)
		if !m.admit(k, tc) {
			_ = tc.Close()
			continue
		}
		go m.forward(k, tc)
	}
}

// admit counts c against rank k's cap.
func (m *Membership) admit(k int, c *net.TCPConn) bool {
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	if m.left || m.perRank[k] >= m.n.lim.PerRank || m.open >= m.n.lim.PerGang {
		return false
	}
	m.perRank[k]++
	m.open++
	m.conns[c] = struct{}{}
	return true
}

// forward carries c over a new stream to rank k's provider.
func (m *Membership) forward(k int, c *net.TCPConn) {
	n := m.n
	defer func() {
		_ = c.Close()
		n.mu.Lock()
		m.perRank[k]--
		m.open--
		delete(m.conns, c)
		n.mu.Unlock()
	}()
	to := m.members[k].Peer
	ctx, cancel := context.WithTimeout(context.Background(), n.lim.DialTimeout)
	s, err := n.host.LibP2P().NewStream(ctx, to, n.host.ProtocolID(Proto))
	cancel()
	if err != nil {
		n.log.Info("gang stream not opened", "gang", m.gang, "to", k, "peer", to, "err", err)
		return
	}
	if !m.trackStream(s) {
		_ = s.Reset()
		return
	}
	defer m.untrackStream(s)
	_ = s.SetDeadline(time.Now().Add(n.lim.HeaderTimeout))
	if err := open(s, Header{Gang: m.gang, From: m.rank, To: k, Lease: m.members[m.rank].Lease}); err != nil {
		_ = s.Reset()
		n.log.Info("gang stream refused", "gang", m.gang, "to", k, "peer", to, "err", err)
		return
	}
	_ = s.SetDeadline(time.Time{})
	if err := tunnel.Join(s, c, n.tunnelLimits()); err != nil {
		n.log.Debug("gang stream cut", "gang", m.gang, "to", k, "peer", to, "err", err)
	}
}

func (m *Membership) trackStream(s network.Stream) bool {
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	if m.left {
		return false
	}
	m.streams[s] = struct{}{}
	return true
}

func (m *Membership) untrackStream(s network.Stream) {
	m.n.mu.Lock()
	delete(m.streams, s)
	m.n.mu.Unlock()
}
