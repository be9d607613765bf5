package gangnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/libp2p/go-libp2p/core/network"
)

// joinInContainer is Join for a member whose container has a network
// namespace of its own (Local.InContainer): fixed entries on the
// container's loopback, listeners made later by Open.
func (n *Net) joinInContainer(r Roster, rank int, members []Member) (*Membership, error) {
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	self := netip.AddrPortFrom(lo, uint16(r.port()))
	m := &Membership{n: n, gang: r.Gang, rank: rank, members: members, container: At(self), inContainer: true,
		peers: make([]string, r.Size), listeners: make([]net.Listener, r.Size), perRank: make([]int, r.Size),
		conns: map[*net.TCPConn]struct{}{}, streams: map[network.Stream]struct{}{}}
	for k := range members {
		m.peers[k] = inContainerEntry(r, rank, k)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("gang %q: the gang network is closed", r.Gang)
	}
	if n.gangs[r.Gang] != nil {
		return nil, fmt.Errorf("gang %q: already joined on this provider", r.Gang)
	}
	n.gangs[r.Gang] = m
	return m, nil
}

// inContainerEntry is rank k's address as seen from rank's container:
// its own gang port, or the port above it by k+1 for another rank.
func inContainerEntry(r Roster, rank, k int) string {
	port := r.port()
	if k != rank {
		port += k + 1
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// Open makes an InContainer member's listeners inside its container's
// network namespace, through o, and dials its gang port through o from
// then on; call it once the container runs. Until then, connections from
// the other members are refused as unreachable, which a rendezvous
// retries.
func (m *Membership) Open(o Opener) error {
	if !m.inContainer {
		return errors.New("gang: Open is for a member in a container's namespace")
	}
	lns := make([]net.Listener, len(m.peers))
	closeAll := func() {
		for _, l := range lns {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	for k, addr := range m.peers {
		if k == m.rank {
			continue
		}
		ln, err := o.Listen(addr)
		if err != nil {
			closeAll()
			return fmt.Errorf("gang %q: listen for rank %d at %s in the container: %w", m.gang, k, addr, err)
		}
		lns[k] = ln
	}
	m.n.mu.Lock()
	if m.left || m.opener != nil {
		left := m.left
		m.n.mu.Unlock()
		closeAll()
		if left {
			return fmt.Errorf("gang %q: the member has left", m.gang)
		}
		return fmt.Errorf("gang %q: already open", m.gang)
	}
	m.opener, m.listeners = o, lns
	m.n.mu.Unlock()
	for k, ln := range m.listeners {
		if ln != nil {
			m.loops.Add(1)
			go m.accept(k, ln)
		}
	}
	return nil
}

// InContainer reports whether m's listeners are made by Open, inside its
// container's network namespace.
func (m *Membership) InContainer() bool { return m.inContainer }

func (m *Membership) openerNow() Opener {
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	return m.opener
}
