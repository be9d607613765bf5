package peers

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2ptest "github.com/libp2p/go-libp2p/core/test"
	ma "github.com/multiformats/go-multiaddr"
	bolt "go.etcd.io/bbolt"
)

var quietLog = slog.New(slog.DiscardHandler)

// boltBucket is a Bucket on a bbolt database of its own, as node's
// node.db peers bucket is.
type boltBucket struct{ db *bolt.DB }

var testBucket = []byte("peers")

func openBucket(t testing.TB) boltBucket {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "node.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(testBucket); return err }); err != nil {
		t.Fatal(err)
	}
	return boltBucket{db}
}

func (b boltBucket) View(fn func(Tx) error) error {
	return b.db.View(func(tx *bolt.Tx) error { return fn(tx.Bucket(testBucket)) })
}

func (b boltBucket) Update(fn func(Tx) error) error {
	return b.db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(testBucket)) })
}

func addrInfo(h *p2p.Host) peer.AddrInfo {
	return peer.AddrInfo{ID: h.ID(), Addrs: h.LibP2P().Addrs()}
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The peers bucket keeps at most knownPeersMax records, evicting the
// longest unseen, and a record keeps at most knownAddrsMax addresses; a
// start loads only its own network's records.
func TestKnownPeersAreBounded(t *testing.T) {
	st := openBucket(t)
	const total = knownPeersMax + 50
	ids := make([]peer.ID, total)
	for i := range ids {
		ids[i] = libp2ptest.RandPeerIDFatal(t)
	}
	// Written in batches, as the debounced flushes do; peer i was seen at i.
	for from := 0; from < total; from += 30 {
		batch := map[peer.ID]knownPeer{}
		for i := from; i < min(from+30, total); i++ {
			batch[ids[i]] = knownPeer{Network: repo.NetworkLocal, Addrs: []string{"/ip4/127.0.0.1/tcp/4030"}, Seen: int64(1000 + i)}
		}
		if err := saveKnownPeers(st, batch); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LoadKnown(st, repo.NetworkLocal)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != knownPeersMax {
		t.Fatalf("%d peers kept, want %d", len(got), knownPeersMax)
	}
	for i, ai := range got { // newest first: the 50 oldest went
		if want := ids[total-1-i]; ai.ID != want {
			t.Fatalf("peer %d is %s, want %s (seen at %d)", i, ai.ID, want, 1000+total-1-i)
		}
	}
	// Another network's record evicts the oldest too, but is not loaded.
	other := libp2ptest.RandPeerIDFatal(t)
	if err := saveKnownPeers(st, map[peer.ID]knownPeer{other: {Network: "elsewhere", Addrs: []string{"/ip4/10.0.0.1/tcp/4030"}, Seen: 5000}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := LoadKnown(st, repo.NetworkLocal); len(got) != knownPeersMax-1 || slices.ContainsFunc(got, func(ai peer.AddrInfo) bool { return ai.ID == other }) {
		t.Fatalf("after another network's record: %d of ours loaded (want %d), its record among them: %v", len(got), knownPeersMax-1, slices.ContainsFunc(got, func(ai peer.AddrInfo) bool { return ai.ID == other }))
	}
	if got, _ := LoadKnown(st, "elsewhere"); len(got) != 1 || got[0].ID != other {
		t.Fatalf("the other network loads %v, want only %s", got, other)
	}

	// Addresses: distinct, dialable, this peer's, at most knownAddrsMax.
	id := ids[0]
	var cands []ma.Multiaddr
	cands = append(cands, ma.StringCast("/ip4/0.0.0.0/tcp/4030"), ma.StringCast("/ip6/::/tcp/4030"),
		ma.StringCast("/ip4/127.0.0.1/tcp/4030/p2p/"+id.String()), ma.StringCast("/ip4/127.0.0.1/tcp/4030"),
		ma.StringCast("/ip4/192.168.1.2/tcp/4030/p2p/"+ids[1].String()))
	for i := range 20 {
		cands = append(cands, ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/udp/4030/quic-v1", i+1)))
	}
	addrs := capAddrs(id, cands)
	if len(addrs) != knownAddrsMax || addrs[0] != "/ip4/127.0.0.1/tcp/4030" || slices.Contains(addrs[1:], addrs[0]) {
		t.Fatalf("addresses kept %v", addrs)
	}
	for _, s := range addrs {
		if m := ma.StringCast(s); slices.ContainsFunc(m, func(c ma.Component) bool { return c.Code() == ma.P_P2P }) || s == "/ip4/0.0.0.0/tcp/4030" {
			t.Fatalf("kept %s", s)
		}
	}
}

// Restoring knownPeersMax peers at start (reading node.db and filling the
// peerstore) is on the start-up path of every node.
func BenchmarkRestoreKnownPeers(b *testing.B) {
	st := openBucket(b)
	recs := map[peer.ID]knownPeer{}
	for i := range knownPeersMax {
		var addrs []string
		for j := range knownAddrsMax {
			addrs = append(addrs, fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4030", i>>8, i&255, j+1))
		}
		recs[libp2ptest.RandPeerIDFatal(b)] = knownPeer{Network: repo.NetworkLocal, Addrs: addrs, Seen: int64(i)}
	}
	if err := saveKnownPeers(st, recs); err != nil {
		b.Fatal(err)
	}
	h, err := p2p.New(context.Background(), p2p.Network(repo.NetworkLocal), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	k := NewKnown(h, st, quietLog)
	b.ResetTimer()
	for b.Loop() {
		peers, err := k.Restore()
		if err != nil || len(peers) != knownPeersMax {
			b.Fatalf("restored %d peers: %v", len(peers), err)
		}
	}
}

// A debounced write of knownPeersMax peers into a full bucket: the most one
// flush costs.
func BenchmarkSaveKnownPeers(b *testing.B) {
	st := openBucket(b)
	// Two sets of peers taking turns: each write replaces the whole bucket.
	var sets [2][]peer.ID
	for i := range sets {
		for range knownPeersMax {
			sets[i] = append(sets[i], libp2ptest.RandPeerIDFatal(b))
		}
	}
	addrs := []string{"/ip4/10.0.0.1/tcp/4030", "/ip4/10.0.0.1/udp/4030/quic-v1"}
	for round := 0; b.Loop(); round++ {
		recs := make(map[peer.ID]knownPeer, knownPeersMax)
		for _, id := range sets[round%2] {
			recs[id] = knownPeer{Network: repo.NetworkLocal, Addrs: addrs, Seen: int64(round)}
		}
		if err := saveKnownPeers(st, recs); err != nil {
			b.Fatal(err)
		}
	}
}

// Hostile peers: one of another network that connects is never recorded
// (nor marked again at every flush), and one of ours announcing a
// thousand addresses is recorded with at most knownAddrsMax, the one we
// dialled it on first.
func TestKnownPeersRecordNoForeignerAndFewAddresses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bare := func(network string) *p2p.Host {
		h, err := p2p.New(ctx, p2p.Network(network), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
			p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	h, foreign, member := bare(repo.NetworkLocal), bare("elsewhere"), bare(repo.NetworkLocal)
	st := openBucket(t)
	k := NewKnown(h, st, quietLog)
	for _, p := range []*p2p.Host{foreign, member} {
		if err := h.LibP2P().Connect(ctx, addrInfo(p)); err != nil {
			t.Fatal(err)
		}
	}
	ps := h.LibP2P().Peerstore()
	waitFor(t, 10*time.Second, "both peers identified", func() bool {
		a, _ := ps.GetProtocols(foreign.ID())
		b, _ := ps.GetProtocols(member.ID())
		return len(a) > 0 && len(b) > 0
	})
	var flood []ma.Multiaddr
	for i := range 1000 {
		flood = append(flood, ma.StringCast(fmt.Sprintf("/ip4/10.%d.%d.1/tcp/4030", i>>8, i&255)))
	}
	ps.AddAddrs(member.ID(), flood, time.Hour) // as its identify would
	k.mark(foreign.ID())
	k.mark(member.ID())
	if err := k.flush(); err != nil {
		t.Fatal(err)
	}
	if len(k.marked) != 0 {
		t.Errorf("%d peers marked again after the flush, want none", len(k.marked))
	}
	got, err := LoadKnown(st, repo.NetworkLocal)
	if err != nil {
		t.Fatal(err)
	}
	if other, _ := LoadKnown(st, "elsewhere"); len(got) != 1 || got[0].ID != member.ID() || len(other) != 0 {
		t.Fatalf("recorded %v (and %v for the other network), want only %s", got, other, member.ID())
	}
	dialled := member.LibP2P().Addrs()[0]
	if addrs := got[0].Addrs; len(addrs) != knownAddrsMax || !addrs[0].Equal(dialled) {
		t.Errorf("recorded %d addresses starting at %s, want %d starting at %s", len(addrs), addrs[0], knownAddrsMax, dialled)
	}
}
