package node

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

type feedNode struct {
	h   *p2p.Host
	key crypto.PrivKey
	f   *feeds
}

func newFeedNode(t *testing.T, ctx context.Context) *feedNode { return newFeedNodeTB(t, ctx) }

func newFeedNodeTB(t testing.TB, ctx context.Context) *feedNode {
	t.Helper()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := p2p.New(ctx, p2p.Identity(key), p2p.Network("local"), p2p.DisableNATServices(),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DHTMode("server"), p2p.DiscoveryInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFeeds(h, st, key, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	return &feedNode{h: h, key: key, f: f}
}

func link(t *testing.T, ctx context.Context, a, b *feedNode) { linkTB(t, ctx, a, b) }

func linkTB(t testing.TB, ctx context.Context, a, b *feedNode) {
	t.Helper()
	if err := a.h.Connect(ctx, peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.LibP2P().Addrs()}); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func headOf(n *feedNode, author string) ledger.Head {
	h, _, _ := n.f.store.Head(author)
	return h
}

// TestEquivocationIsCaughtByEveryNodeAndVerifiesOffline: an author shows
// one entry to the network, then a different entry with the same sequence
// number. Three honest nodes detect the fork, freeze the author's feed and
// hold a proof that verifies with nothing but its bytes.
func TestEquivocationIsCaughtByEveryNodeAndVerifiesOffline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	honest := []*feedNode{newFeedNode(t, ctx), newFeedNode(t, ctx), newFeedNode(t, ctx)}
	rogue := newFeedNode(t, ctx)
	link(t, ctx, honest[0], honest[1])
	link(t, ctx, honest[1], honest[2])
	for _, h := range honest {
		link(t, ctx, rogue, h)
	}
	time.Sleep(1500 * time.Millisecond) // gossip meshes form
	author := rogue.h.ID().String()

	cidA, err := rogue.f.append(ledger.TypeOutcome, []byte(`{"result":"completed"}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range honest {
		eventually(t, 10*time.Second, "honest node "+string(rune('0'+i))+" holds the first entry", func() bool {
			return headOf(h, author).CID.String() == cidA
		})
	}

	// The fork: another seq 1, served and announced from a second store.
	_, seB, err := ledger.NewEntry(rogue.key, nil, ledger.TypeOutcome, []byte(`{"result":"failed"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	forked, err := ledger.OpenStore(filepath.Join(t.TempDir(), "forked.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer forked.Close()
	if err := forked.Append(seB); err != nil {
		t.Fatal(err)
	}
	serveFrom(rogue, forked)
	rogue.f.publish(ledgerHead{Author: author, Seq: 1, CID: seB.CID().String()})

	for i, h := range honest {
		eventually(t, 10*time.Second, "honest node "+string(rune('0'+i))+" freezes the feed", func() bool {
			_, frozen := h.f.store.Frozen(author)
			return frozen
		})
		proof, _ := h.f.store.Frozen(author)
		if who, err := ledger.VerifyProof(proof); err != nil || who != author {
			t.Fatalf("node %d's proof: %v, %q", i, err, who)
		}
	}
	// A frozen feed takes nothing more: the rogue carries on from B.
	rawB, _ := seB.Marshal()
	entryB, _, _ := ledger.DecodeSignedEntry(rawB)
	_, se2, err := ledger.NewEntry(rogue.key, entryB, ledger.TypeOutcome, []byte(`{"result":"completed"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	onward, err := ledger.OpenStore(filepath.Join(t.TempDir(), "onward.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer onward.Close()
	if err := onward.Append(seB); err != nil {
		t.Fatal(err)
	}
	if err := onward.Append(se2); err != nil {
		t.Fatal(err)
	}
	serveFrom(rogue, onward)
	rogue.f.publish(ledgerHead{Author: author, Seq: 2, CID: se2.CID().String()})
	time.Sleep(time.Second)
	for i, h := range honest {
		if got := headOf(h, author); got.Seq != 1 {
			t.Fatalf("node %d accepted an entry after freezing: head %+v", i, got)
		}
	}
}

// TestAntiEntropyRepairsWhatGossipMissed: a node that was not connected
// while entries were appended catches up by reconciling with a peer.
func TestAntiEntropyRepairsWhatGossipMissed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := newFeedNode(t, ctx), newFeedNode(t, ctx)
	var last string
	for i := 0; i < 20; i++ {
		c, err := a.f.append(ledger.TypeOutcome, []byte(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		last = c
	}
	link(t, ctx, b, a)
	if err := b.f.reconcile(ctx, a.h.ID()); err != nil {
		t.Fatal(err)
	}
	if got := headOf(b, a.h.ID().String()); got.Seq != 20 || got.CID.String() != last {
		t.Fatalf("after anti-entropy: %+v, want seq 20 %s", got, last)
	}
}

// TestPartitionHealsToIdenticalHeads: six nodes split 3+3, both sides
// append while apart, then the partition heals: every node holds the same
// heads within 10 s and no entry is lost.
func TestPartitionHealsToIdenticalHeads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ns []*feedNode
	for i := 0; i < 6; i++ {
		ns = append(ns, newFeedNode(t, ctx))
	}
	left, right := ns[:3], ns[3:]
	for _, side := range [][]*feedNode{left, right} {
		link(t, ctx, side[0], side[1])
		link(t, ctx, side[1], side[2])
	}
	time.Sleep(time.Second)
	for i, n := range ns {
		for k := 0; k < 5+i; k++ {
			if _, err := n.f.append(ledger.TypeOutcome, []byte(`{"side":1}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	heal := time.Now()
	link(t, ctx, left[2], right[0])
	want := map[string]uint64{}
	for i, n := range ns {
		want[n.h.ID().String()] = uint64(5 + i)
	}
	eventually(t, 10*time.Second, "identical heads on all six nodes", func() bool {
		for _, n := range ns {
			for author, seq := range want {
				if headOf(n, author).Seq != seq {
					return false
				}
			}
		}
		return true
	})
	t.Logf("converged %v after the partition healed", time.Since(heal))
}

// serveFrom makes a node answer sync requests from another store: how the
// rogue shows a different history to the network.
func serveFrom(n *feedNode, st *ledger.Store) {
	alt := &feeds{host: n.h, store: st, key: n.key, log: n.f.log}
	n.h.LibP2P().SetStreamHandler(n.h.ProtocolID(ledgerSyncProto), alt.serve)
}
