package replicate

import (
	"context"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// pushesOf sums the "have" pushes ns have sent.
func pushesOf(ns []*feedNode) int64 {
	var n int64
	for _, x := range ns {
		n += x.f.pushes.Load()
	}
	return n
}

// In a full mesh an entry costs about one push per peer, the author's:
// the others heard from the author, so no node relays the head to them.
// Before told lists, each of the other nodes told every other, (N-1)^2
// pushes in all (36 here).
func TestAFullMeshRelaysNoHeadTheAuthorTold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 7
	var ns []*feedNode
	for range n {
		ns = append(ns, newFeedNode(t, ctx))
	}
	for i := range ns {
		for j := i + 1; j < n; j++ {
			link(t, ctx, ns[i], ns[j])
		}
	}
	time.Sleep(time.Second) // connections' own reconciles and gossip meshes settle
	author := ns[0]
	for round := range 3 {
		before := pushesOf(ns)
		c, err := author.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "every node holds the entry", func() bool {
			for _, x := range ns {
				if headOf(x, author.h.ID().String()).CID.String() != c {
					return false
				}
			}
			return true
		})
		time.Sleep(300 * time.Millisecond) // any relay still on its way
		got := pushesOf(ns) - before
		// The author's n-1, and a few relays by a node that fetched on
		// gossip before the author's push reached it.
		if limit := int64(2 * (n - 1)); got > limit {
			t.Fatalf("round %d: %d pushes for one entry among %d nodes in a full mesh, want at most %d", round, got, n, limit)
		}
		t.Logf("round %d: %d pushes for one entry among %d nodes", round, got, n)
	}
}

// A hub relays an author's head to the spokes the author is not connected
// to: they hold the entry within seconds, not at anti-entropy's 30 s.
func TestAHubRelaysToSpokesTheAuthorDidNotTell(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub := newFeedNode(t, ctx)
	var spokes []*feedNode
	for range 4 {
		s := newFeedNodeDHT(t, ctx, "client")
		link(t, ctx, s, hub)
		spokes = append(spokes, s)
	}
	time.Sleep(time.Second)
	for i, a := range spokes {
		for _, b := range spokes[i+1:] {
			if a.h.LibP2P().Network().Connectedness(b.h.ID()) == network.Connected {
				t.Fatal("two spokes found each other: the test needs them to meet only through the hub")
			}
		}
	}
	author := spokes[0]
	c, err := author.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, 5*time.Second, "every spoke holds the entry", func() bool {
		for _, s := range spokes {
			if headOf(s, author.h.ID().String()).CID.String() != c {
				return false
			}
		}
		return true
	})
	t.Logf("every spoke held the entry %v after it was appended", time.Since(start).Round(time.Millisecond))
}

// Only an author's list of its own head is taken: a third party that
// says it told a peer of someone else's head does not stop a relay to
// that peer, and the author saying so does.
func TestOnlyTheAuthorsToldListCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	relay, author, other, target := newFeedNode(t, ctx), newFeedNode(t, ctx), newFeedNode(t, ctx), newFeedNode(t, ctx)
	link(t, ctx, author, relay)
	link(t, ctx, other, relay)
	c, err := author.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	head := ledgerHead{Author: author.h.ID().String(), Seq: 1, CID: c}
	told := []string{target.h.ID().String()}
	send := func(from *feedNode) {
		t.Helper()
		s, err := from.h.LibP2P().NewStream(network.WithNoDial(ctx, "test"), relay.h.ID(), from.h.ProtocolID(ledgerSyncProto2))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := writeMsg(s, syncRequest{Kind: "have", Heads: []ledgerHead{head}, Told: told}); err != nil {
			t.Fatal(err)
		}
	}
	send(other)
	time.Sleep(500 * time.Millisecond)
	if relay.f.told.covers(head.Author, head.Seq, target.h.ID()) {
		t.Fatal("a third party's list was taken for the author's")
	}
	send(author)
	eventually(t, 5*time.Second, "the author's list taken", func() bool {
		return relay.f.told.covers(head.Author, head.Seq, target.h.ID())
	})
}

// A peer that speaks only ledger-sync/1 (a node of before told lists,
// whose decoder refuses unknown fields) gets plain pushes it can read.
func TestAPeerOfBeforeToldListsGetsPlainPushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	author, old := newFeedNode(t, ctx), newFeedNode(t, ctx)
	// What a ledger-sync/1 "have" was: the request without Told.
	type requestBefore struct {
		Kind   string       `json:"kind"`
		Author string       `json:"author,omitempty"`
		From   uint64       `json:"from,omitempty"`
		To     uint64       `json:"to,omitempty"`
		Ranges []syncRange  `json:"ranges,omitempty"`
		Heads  []ledgerHead `json:"heads,omitempty"`
	}
	got := make(chan requestBefore, 16)
	lh := old.h.LibP2P()
	lh.RemoveStreamHandler(old.h.ProtocolID(ledgerSyncProto2))
	lh.SetStreamHandler(old.h.ProtocolID(ledgerSyncProto), func(s network.Stream) {
		defer s.Close()
		raw, err := p2p.ReadFrame(s, maxSyncRequest)
		if err != nil {
			return
		}
		var req requestBefore
		if err := decodeMsg(raw, &req); err != nil {
			t.Errorf("a push to a ledger-sync/1 peer does not decode as one: %v", err)
			return
		}
		if req.Kind == "have" {
			got <- req
		}
	})
	link(t, ctx, author, old)
	time.Sleep(500 * time.Millisecond)
	if _, err := author.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		if len(req.Heads) != 1 || req.Heads[0].Author != author.h.ID().String() {
			t.Fatalf("push carried %+v, want the author's head", req.Heads)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no push reached the ledger-sync/1 peer")
	}
}

// The list remembers the latest head per author, for the peers named,
// and starts over past maxToldAuthors.
func TestToldList(t *testing.T) {
	a, b, c := newActor(t), newActor(t), newActor(t)
	pb, _ := peer.Decode(b.id)
	pc, _ := peer.Decode(c.id)
	l := newToldList()
	l.record(a.id, 5, []string{b.id, "not a peer id"})
	switch {
	case !l.covers(a.id, 5, pb), !l.covers(a.id, 4, pb):
		t.Fatal("a told peer is not covered at or below the told seq")
	case l.covers(a.id, 6, pb):
		t.Fatal("a later head than the one told is covered")
	case l.covers(a.id, 5, pc):
		t.Fatal("a peer not told is covered")
	case !l.covers(b.id, 99, pb):
		t.Fatal("an author does not cover its own head")
	}
	l.record(a.id, 4, []string{c.id}) // older: dropped
	if l.covers(a.id, 4, pc) || !l.covers(a.id, 5, pb) {
		t.Fatal("an older list replaced a newer one")
	}
	for i := range maxToldAuthors {
		l.record(newActorID(t, i), 1, []string{b.id})
	}
	if len(l.authors) > maxToldAuthors {
		t.Fatalf("%d authors remembered, bound %d", len(l.authors), maxToldAuthors)
	}
}

func newActorID(t *testing.T, _ int) string { return newActor(t).id }
