package gangnet

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The gang network's tests run real libp2p hosts on loopback and real TCP
// "containers": listeners on 127.0.0.1 that stand for each member's gang
// port, reached only through the addresses in GLEANER_GANG_PEERS.

var quietLog = slog.New(slog.DiscardHandler)

var loopback = netip.MustParseAddr("127.0.0.1")

// bareHost is a libp2p host of the local network, closed with the test.
func bareHost(t testing.TB, ctx context.Context) *p2p.Host {
	t.Helper()
	h, err := p2p.New(ctx, p2p.Network("local"), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func connect(t testing.TB, ctx context.Context, from, to *p2p.Host) {
	t.Helper()
	if err := from.LibP2P().Connect(ctx, peer.AddrInfo{ID: to.ID(), Addrs: to.LibP2P().Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// testLimits are small enough to reach in a test.
func testLimits() Limits {
	l := DefaultLimits()
	l.HeaderTimeout, l.DialTimeout, l.Idle = 2*time.Second, 2*time.Second, 5*time.Second
	return l
}

// leaseOf is rank's lease ID in a gangRig's roster.
func leaseOf(rank int) string { return fmt.Sprintf("lease%d", rank) }

// provider is one member's provider: a host serving a Net.
type provider struct {
	h   *p2p.Host
	net *Net
}

func newProvider(t testing.TB, ctx context.Context, lim Limits) *provider {
	p := &provider{h: bareHost(t, ctx)}
	p.net = New(p.h, lim, quietLog)
	t.Cleanup(p.net.Close)
	p.h.LibP2P().SetStreamHandler(p.h.ProtocolID(Proto), p.net.Handle)
	return p
}

// gangRig is n providers, all connected, with a roster placing rank i on
// provider i under lease "lease<i>".
type gangRig struct {
	provs  []*provider
	roster Roster
}

func newGangRig(t testing.TB, ctx context.Context, gang string, n int, lim Limits) *gangRig {
	r := &gangRig{roster: Roster{Gang: gang, Size: n}}
	for i := range n {
		p := newProvider(t, ctx, lim)
		for _, q := range r.provs {
			connect(t, ctx, p.h, q.h)
		}
		r.provs = append(r.provs, p)
		r.roster.Members = append(r.roster.Members, Member{Rank: i, Peer: p.h.ID(), Lease: leaseOf(i)})
	}
	return r
}

// container stands for one member's container: a server on its gang port
// that reads a message to EOF, records it, and answers with its rank and
// the message's digest.
type container struct {
	rank int
	addr netip.AddrPort

	mu   sync.Mutex
	got  []string // "from <rank>" lines received
	open []net.Conn
}

func newContainer(t testing.TB, rank int) *container {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c := &container{rank: rank, addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go c.serve(conn)
		}
	}()
	return c
}

func (c *container) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	from, err := br.ReadString('\n')
	if err != nil {
		return
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, br); err != nil {
		return
	}
	c.mu.Lock()
	c.got = append(c.got, strings.TrimSpace(from))
	c.mu.Unlock()
	fmt.Fprintf(conn, "rank %d got %s\n", c.rank, hex.EncodeToString(sum.Sum(nil)))
}

func (c *container) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// exchange is what member from's process does: it connects to addr (an
// entry of its GLEANER_GANG_PEERS), sends its rank and payload, closes
// its side, and returns the answer.
func exchange(addr string, from int, payload []byte) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintf(conn, "from %d\n", from); err != nil {
		return "", err
	}
	if _, err := conn.Write(payload); err != nil {
		return "", err
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// join joins every member of the rig, each with a container of its own,
// and returns the containers and memberships by rank.
func (r *gangRig) join(t testing.TB) ([]*container, []*Membership) {
	t.Helper()
	var cs []*container
	var ms []*Membership
	for i, p := range r.provs {
		c := newContainer(t, i)
		m, err := p.net.Join(Local{Roster: r.roster, Rank: i, Lease: leaseOf(i), ListenIP: loopback, Self: c.addr, Container: At(c.addr)})
		if err != nil {
			t.Fatal(err)
		}
		cs, ms = append(cs, c), append(ms, m)
	}
	return cs, ms
}

// rawStream opens a gang stream from h to p with header hd, as a member's
// provider would: nil once the raw bytes may follow.
func rawStream(ctx context.Context, h *p2p.Host, to peer.ID, hd Header) (io.ReadWriteCloser, error) {
	s, err := h.LibP2P().NewStream(ctx, to, h.ProtocolID(Proto))
	if err != nil {
		return nil, err
	}
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := open(s, hd); err != nil {
		_ = s.Reset()
		return nil, err
	}
	_ = s.SetDeadline(time.Time{})
	return s, nil
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readReply reads a gang stream's reply frame.
func readReply(r io.Reader, rep *Reply) error { return p2p.ReadJSON(r, MaxReply, rep) }

// echoContainer is rank 1's container for the teardown tests: it echoes
// lines and counts its open connections.
type echoContainer struct {
	addr netip.AddrPort
	mu   sync.Mutex
	open int
}

func (e *echoContainer) conns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open
}

// joinEcho joins a two-member rig: rank 0 with a container nobody calls,
// rank 1 with an echoContainer.
func (r *gangRig) joinEcho(t testing.TB) ([]*Membership, *echoContainer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	e := &echoContainer{addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.open++
			e.mu.Unlock()
			go func() {
				_, _ = io.Copy(c, c)
				c.Close()
				e.mu.Lock()
				e.open--
				e.mu.Unlock()
			}()
		}
	}()
	idle := newContainer(t, 0)
	m0, err := r.provs[0].net.Join(Local{Roster: r.roster, Rank: 0, Lease: leaseOf(0), ListenIP: loopback, Container: At(idle.addr)})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := r.provs[1].net.Join(Local{Roster: r.roster, Rank: 1, Lease: leaseOf(1), ListenIP: loopback, Container: At(e.addr)})
	if err != nil {
		t.Fatal(err)
	}
	return []*Membership{m0, m1}, e
}
