package providing

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/node/wire"
)

// memberSpec is member rank of a gang of size, as the renter's node
// writes it.
func memberSpec(gang string, rank, size int) []byte {
	return fmt.Appendf(spec("member", auction.Silver), "gang_of: {id: %s, rank: %d, size: %d}\n", gang, rank, size)
}

// A gang member's start carries its roster; the provider joins the
// gang's network before the container starts and gives it
// GLEANER_GANG_PEERS, through which it reaches the other member's
// container over the providers' libp2p connection. A roster naming
// another renter's gang, or another size than the spec's, is refused and
// nothing starts; under an executor without a gang network the member
// runs without the peers.
func TestGangMemberStartJoinsItsGangsNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hostA, hostB := gangHosts(t, ctx)
	netA, netB := gangNetOn(t, hostA), gangNetOn(t, hostB)

	// Rank 1's "container": an echo server on the gang port, which its
	// provider (B) reaches on 127.0.0.1.
	port := echoServer(t)

	exec := newFakeExec()
	exec.kind = "process"
	key0, _ := testKey(t)
	r := newRigOver(t, 3, key0, newMemStore(), exec, func(c *Config) { c.Gangs = netA })
	rt := r.renter()
	const gang = "train-1a2b"
	roster := func(gangName string, size int, leaseA string) []byte {
		ro := gangnet.Roster{Gang: gangName, Size: size, Port: port, Members: []gangnet.Member{
			{Rank: 0, Peer: hostA.ID(), Lease: leaseA},
			{Rank: 1, Peer: hostB.ID(), Lease: "bafyrank1lease"},
		}}
		b, err := json.Marshal(ro)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := gangnet.Key(gang, rt.id)

	// Refused: another renter's gang name, and a size the spec does not say.
	for i, bad := range []func(lease string) []byte{
		func(lease string) []byte { return roster(gangnet.Key(gang, "someone-else"), 2, lease) },
		func(lease string) []byte {
			b := roster(key, 2, lease)
			var ro gangnet.Roster
			_ = json.Unmarshal(b, &ro)
			ro.Size, ro.Members = 3, append(ro.Members, gangnet.Member{Rank: 2, Peer: hostA.ID(), Lease: "bafyrank2lease"})
			b, _ = json.Marshal(ro)
			return b
		},
	} {
		job := "bad-" + strconv.Itoa(i)
		sp := memberSpec(gang, 0, 2)
		raw := rt.lease(job, sp)
		ev := rt.request(wire.JobRequest{Kind: "start", Lease: raw, Spec: sp, Gang: bad(wire.LeaseCID(raw))}).
			until(t, "a refusal", isType(wire.EventError))
		if ev.Status != wire.StatusNotStarted || !strings.Contains(ev.Error, "gang") {
			t.Fatalf("bad roster %d: %+v, want a not-started gang error", i, ev)
		}
		select {
		case j := <-exec.started:
			t.Fatalf("bad roster %d started a container: %+v", i, j.spec)
		default:
		}
	}

	// Rank 1's provider joins its side (as its own start would).
	sp := memberSpec(gang, 0, 2)
	raw := rt.lease("member-0", sp)
	good := roster(key, 2, wire.LeaseCID(raw))
	ro, err := gangnet.DecodeRoster(good)
	if err != nil {
		t.Fatal(err)
	}
	mB, err := netB.Join(gangnet.Local{Roster: ro, Rank: 1, Lease: "bafyrank1lease", ListenIP: loopbackAddr(), Container: gangnet.At(echoAddr(port))})
	if err != nil {
		t.Fatal(err)
	}
	defer mB.Leave()

	f := rt.request(wire.JobRequest{Kind: "start", Lease: raw, Spec: sp, Gang: good})
	defer f.close()
	var job *fakeJob
	select {
	case job = <-exec.started:
	case <-ctx.Done():
		t.Fatal("the member's container never started")
	}
	env := job.spec.Provided
	if env[gangnet.EnvRank] != "0" || env[gangnet.EnvSize] != "2" {
		t.Fatalf("gang env %v", env)
	}
	peers := strings.Split(env[gangnet.EnvPeers], ",")
	if len(peers) != 2 {
		t.Fatalf("GLEANER_GANG_PEERS = %q, want two entries", env[gangnet.EnvPeers])
	}
	c, err := net.DialTimeout("tcp", peers[1], 5*time.Second)
	if err != nil {
		t.Fatalf("rank 0 cannot reach rank 1 at %s: %v", peers[1], err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello rank 1\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "echo hello rank 1\n" {
		t.Fatalf("through the gang network: %q, %v", got, err)
	}
	// The member's run ends: its listeners close with it.
	job.exit(0, false)
	f.until(t, "the exit", isType(wire.EventExit))
	deadline := time.Now().Add(10 * time.Second)
	for netA.Stats().Gangs != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the member's gang membership outlived its run: %+v", netA.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func loopbackAddr() netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, 1}) }

func echoAddr(port int) netip.AddrPort { return netip.AddrPortFrom(loopbackAddr(), uint16(port)) }

// A member of a gang's next placement may be started on a provider
// whose member of the last placement has ended but not yet left the
// gang's network: the start waits for it to leave rather than fail the
// whole gang with "already joined".
func TestGangMemberStartWaitsForTheLastPlacementsMemberToLeave(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hostA, hostB := bareHost(t, ctx), bareHost(t, ctx)
	netA := gangnet.New(hostA, gangnet.DefaultLimits(), quietLog)
	t.Cleanup(netA.Close)
	exec := newFakeExec()
	exec.kind = "process"
	key0, _ := testKey(t)
	r := newRigOver(t, 3, key0, newMemStore(), exec, func(c *Config) { c.Gangs = netA })
	rt := r.renter()
	const gang = "train-5c5c"
	key := gangnet.Key(gang, rt.id)
	solo := func(lease string) gangnet.Roster {
		return gangnet.Roster{Gang: key, Size: 2, Port: 29500, Members: []gangnet.Member{
			{Rank: 0, Peer: hostA.ID(), Lease: lease}, {Rank: 1, Peer: hostB.ID(), Lease: "bafyrank1lease"}}}
	}
	// The last placement's member, still joined.
	old, err := netA.Join(gangnet.ProcessLocal(solo("bafyoldlease"), 0, "bafyoldlease"))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, old.Leave)

	sp := fmt.Appendf(spec("member-next", auction.Silver), "gang_of: {id: %s, rank: 0, size: 2}\n", gang)
	raw := rt.lease("member-next", sp)
	b, err := json.Marshal(solo(wire.LeaseCID(raw)))
	if err != nil {
		t.Fatal(err)
	}
	f := rt.request(wire.JobRequest{Kind: "start", Lease: raw, Spec: sp, Gang: b})
	defer f.close()
	select {
	case job := <-exec.started:
		if job.spec.Provided[gangnet.EnvRank] != "0" {
			t.Fatalf("started without its gang env: %v", job.spec.Provided)
		}
		job.exit(0, false)
	case <-ctx.Done():
		t.Fatal("the member never started: its start did not wait for the last placement's member to leave")
	}
	f.until(t, "the exit", isType(wire.EventExit))
}
