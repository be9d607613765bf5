package gangnet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func testPeers(t testing.TB, n int) []peer.ID {
	t.Helper()
	var out []peer.ID
	for range n {
		_, pub, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

func TestRosterValidate(t *testing.T) {
	ps := testPeers(t, 3)
	good := func() Roster {
		return Roster{Gang: "g1", Size: 3, Members: []Member{
			{Rank: 2, Peer: ps[2], Lease: "l2"}, {Rank: 0, Peer: ps[0], Lease: "l0"}, {Rank: 1, Peer: ps[1], Lease: "l1"}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("good roster: %v", err)
	}
	big := Roster{Gang: "big", Size: MaxSize + 1}
	for i := range MaxSize + 1 {
		big.Members = append(big.Members, Member{Rank: i, Peer: ps[0], Lease: fmt.Sprint("l", i)})
	}
	for _, tc := range []struct {
		name string
		edit func(*Roster)
		want string
	}{
		{"bad gang ID", func(r *Roster) { r.Gang = "../x" }, "gang ID"},
		{"empty gang ID", func(r *Roster) { r.Gang = "" }, "gang ID"},
		{"size zero", func(r *Roster) { r.Size, r.Members = 0, nil }, "size 0"},
		{"too large", func(r *Roster) { *r = big }, "size 257"},
		{"members short", func(r *Roster) { r.Members = r.Members[:2] }, "2 members for size 3"},
		{"rank out of range", func(r *Roster) { r.Members[0].Rank = 3 }, "rank 3 outside"},
		{"negative rank", func(r *Roster) { r.Members[0].Rank = -1 }, "rank -1 outside"},
		{"rank twice", func(r *Roster) { r.Members[0].Rank = 0 }, "rank 0 appears twice"},
		{"one provider twice", func(r *Roster) { r.Members[0].Peer = ps[0] }, "on one provider"},
		{"no provider", func(r *Roster) { r.Members[1].Peer = "" }, "provider"},
		{"bad lease", func(r *Roster) { r.Members[1].Lease = "a/b" }, "lease"},
		{"one lease twice", func(r *Roster) { r.Members[1].Lease = "l2" }, "under one lease"},
		{"bad port", func(r *Roster) { r.Port = 70000 }, "port 70000"},
	} {
		r := good()
		tc.edit(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// Join refuses a roster that does not place this provider at the rank it
// is asked to run, a second join of one gang, and a missing address.
func TestJoinRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rig := newGangRig(t, ctx, "j", 2, testLimits())
	c := newContainer(t, 0)
	n := rig.provs[0].net
	for _, tc := range []struct {
		name string
		l    Local
		want string
	}{
		{"not this provider's rank", Local{Roster: rig.roster, Rank: 1, Lease: leaseOf(1), ListenIP: loopback, Container: At(c.addr)}, "not this provider"},
		{"rank out of range", Local{Roster: rig.roster, Rank: 2, Lease: leaseOf(2), ListenIP: loopback, Container: At(c.addr)}, "outside"},
		{"another lease", Local{Roster: rig.roster, Rank: 0, Lease: leaseOf(1), ListenIP: loopback, Container: At(c.addr)}, "not this member's"},
		{"no lease", Local{Roster: rig.roster, Rank: 0, ListenIP: loopback, Container: At(c.addr)}, "not this member's"},
		{"no listen address", Local{Roster: rig.roster, Rank: 0, Lease: leaseOf(0), Container: At(c.addr)}, "no listen address"},
		{"no container", Local{Roster: rig.roster, Rank: 0, Lease: leaseOf(0), ListenIP: loopback}, "gang port"},
		{"invalid roster", Local{Roster: Roster{Gang: "j", Size: 1}, Rank: 0, Lease: leaseOf(0), ListenIP: loopback, Container: At(c.addr)}, "0 members"},
	} {
		if _, err := n.Join(tc.l); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	m, err := n.Join(Local{Roster: rig.roster, Rank: 0, Lease: leaseOf(0), ListenIP: loopback, Container: At(c.addr)})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Peers()[0]; got != "127.0.0.1:29500" {
		t.Errorf("own entry %q, want the default gang port on 127.0.0.1", got)
	}
	m.Leave()
	// ProcessLocal: the listeners and the own entry on 127.0.0.1, the
	// container dialled at the roster's port.
	rs := rig.roster
	rs.Port = 29611
	pl := ProcessLocal(rs, 0, leaseOf(0))
	m, err = n.Join(pl)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave()
	if addr, _ := pl.Container(context.Background()); addr.String() != "127.0.0.1:29611" || m.Peers()[0] != "127.0.0.1:29611" ||
		!strings.HasPrefix(m.Peers()[1], "127.0.0.1:") {
		t.Errorf("ProcessLocal: container %v, peers %v", addr, m.Peers())
	}
	if _, err := n.Join(Local{Roster: rig.roster, Rank: 0, Lease: leaseOf(0), ListenIP: loopback, Container: At(c.addr)}); err == nil || !strings.Contains(err.Error(), "already joined") {
		t.Errorf("second join: %v", err)
	}
}
