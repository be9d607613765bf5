package providing

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A gang member's provider killed while the member runs, and started
// again: it adopts the container and joins the gang's network again,
// with the same entries on the container's loopback, so that the member
// reaches the other members through the same GLEANER_GANG_PEERS. Before
// this, an adopted member ran on cut off from its gang. The "container"
// is a fake job in a real network namespace of the test's (root), where
// the provider makes the member's listeners as it does in a Docker
// container's.
func TestAdoptedGangMemberRejoinsItsGang(t *testing.T) {
	ns := testNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hostA, hostB := gangHosts(t, ctx)
	netA, netB := gangNetOn(t, hostA), gangNetOn(t, hostB)
	port := echoServer(t)

	fx := newFakeExec()
	fx.kind, fx.netns = "docker", ns
	key0, _ := testKey(t)
	r := newRigOver(t, 3, key0, newMemStore(), fx, func(c *Config) { c.Gangs = netA })
	rt := r.renter()
	const gang, job = "train-9f8e", "member-0"
	sp := memberSpec(gang, 0, 2)
	raw := rt.lease(job, sp)
	ro := gangnet.Roster{Gang: gangnet.Key(gang, rt.id), Size: 2, Port: port, Members: []gangnet.Member{
		{Rank: 0, Peer: hostA.ID(), Lease: wire.LeaseCID(raw)},
		{Rank: 1, Peer: hostB.ID(), Lease: "bafyrank1lease"},
	}}
	rosterJSON, err := json.Marshal(ro)
	if err != nil {
		t.Fatal(err)
	}
	mB, err := netB.Join(gangnet.Local{Roster: ro, Rank: 1, Lease: "bafyrank1lease", ListenIP: loopbackAddr(), Container: gangnet.At(echoAddr(port))})
	if err != nil {
		t.Fatal(err)
	}
	defer mB.Leave()

	f := rt.request(wire.JobRequest{Kind: "start", Lease: raw, Spec: sp, Gang: rosterJSON})
	var fj *fakeJob
	select {
	case fj = <-fx.started:
	case <-ctx.Done():
		t.Fatal("the member's container never started")
	}
	peers := strings.Split(fj.spec.Provided[gangnet.EnvPeers], ",")
	if len(peers) != 2 {
		t.Fatalf("GLEANER_GANG_PEERS = %q, want two entries", fj.spec.Provided[gangnet.EnvPeers])
	}
	rank1 := peers[1] // on the container's loopback
	waitFor(t, 10*time.Second, "rank 0 reaching rank 1 from its container", func() bool { return echoes(ctx, ns, rank1, "before") == nil })
	var rec Record
	if err := r.store.Get(job, &rec); err != nil || rec.Gang == nil || rec.Gang.Rank != 0 || string(rec.Gang.Roster) != string(rosterJSON) {
		t.Fatalf("the lease's record keeps gang place %+v (%v), want rank 0 and the roster", rec.Gang, err)
	}

	// The crash: the container runs on; the daemon's sockets, the
	// member's listeners among them, die with its process.
	fx.orphans[r.pj.execID(job)] = &netnsJob{fj, ns}
	r.pj.SimulateCrash()
	f.close()
	r.stop()
	netA.Close()
	if err := echoes(ctx, ns, rank1, "while down"); err == nil {
		t.Fatal("rank 1 answered while rank 0's provider was down: the test would not show a rejoin")
	}

	netA2 := gangNetOn(t, hostA)
	again := newRigOver(t, 3, key0, r.store, fx, func(c *Config) { c.Gangs = netA2 })
	defer again.stop()
	restored, err := again.pj.Restore(time.Now())
	if err != nil || len(restored.Adopted) != 1 || restored.Adopted[0] != job {
		t.Fatalf("restored %+v, %v; want %s adopted", restored, err, job)
	}
	if got := netA2.Stats().Gangs; got != 1 {
		t.Fatalf("after the adoption the provider's gang net holds %d memberships, want 1", got)
	}
	if err := echoes(ctx, ns, rank1, "after the restart"); err != nil {
		t.Fatalf("the adopted member cannot reach rank 1 at the same address: %v", err)
	}

	// Its run ends: it leaves the gang's network.
	fj.exit(0, false)
	waitFor(t, 10*time.Second, "the adopted member leaving its gang's network", func() bool { return netA2.Stats().Gangs == 0 })
}

// testNetns is a new network namespace with its loopback up, removed at
// the test's end: a stand-in for a container's. It needs root.
func testNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("SKIPPED: %s needs root to make a network namespace (ip netns add); CI runs it as root", t.Name())
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "gltest" + hex.EncodeToString(b[:])
	for _, args := range [][]string{{"netns", "add", name}, {"-n", name, "link", "set", "lo", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return "/var/run/netns/" + name
}

// echoServer is rank 1's "container": a line echo server on the host's
// loopback, which rank 1's provider reaches; its port.
func echoServer(t *testing.T) int {
	t.Helper()
	return int(tcpServer(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = c.Write([]byte("echo " + line))
	}).Port())
}

// gangHosts is two bare hosts, A connected to B.
func gangHosts(t *testing.T, ctx context.Context) (a, b *p2p.Host) {
	t.Helper()
	a, b = bareHost(t, ctx), bareHost(t, ctx)
	if err := a.LibP2P().Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.LibP2P().Addrs()}); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// gangNetOn is a gang net on h that serves h's gang streams, closed at
// the test's end (Close may come earlier too).
func gangNetOn(t *testing.T, h *p2p.Host) *gangnet.Net {
	t.Helper()
	n := gangnet.New(h, gangnet.DefaultLimits(), quietLog)
	t.Cleanup(n.Close)
	h.LibP2P().SetStreamHandler(h.ProtocolID(gangnet.Proto), n.Handle)
	return n
}

// echoes dials addr from inside the network namespace ns and checks that
// a line sent comes back echoed.
func echoes(ctx context.Context, ns, addr, line string) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := gangnet.Netns(ns).Dial(dctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != "echo "+line+"\n" {
		return &net.AddrError{Err: "answered " + got, Addr: addr}
	}
	return nil
}
