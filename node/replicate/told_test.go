package replicate

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"

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

// In a full mesh an entry costs about 1 + crossCheckPeers pushes per
// peer: the author's, and each other node's cross-checks; the others
// heard from the author. Before told lists, each of the other nodes told
// every other and the author, 8 x 8 pushes here, and with the author's
// own 8, 72 in all.
func TestAFullMeshRelaysAHeadToFewOfThePeersTheAuthorTold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 9
	ns := fullMesh(t, ctx, n)
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
		// The author's n-1, each other node's crossCheckPeers on
		// average, and room for a node that fetched on gossip before the
		// author's push reached it and so relayed to all.
		if limit := int64((3 + crossCheckPeers) * (n - 1)); got > limit {
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
// and past maxToldAuthors forgets one author for each new one; a relay
// goes to every peer not named, never to the author, and to exactly
// crossCheckPeers of the named peers it is connected to, picked at random.
func TestToldList(t *testing.T) {
	a, b, c := newActor(t), newActor(t), newActor(t)
	pa, _ := peer.Decode(a.id)
	pb, _ := peer.Decode(b.id)
	pc, _ := peer.Decode(c.id)
	l := newToldList()
	l.record(a.id, 5, parseTold([]string{b.id, "not a peer id"}))
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
	if got := l.skips(a.id, 6, []peer.ID{pa, pb, pc}); got != nil {
		t.Fatalf("a head later than the list's has skips %v", got)
	}
	l.record(a.id, 4, parseTold([]string{c.id})) // older: dropped
	if l.covers(a.id, 4, pc) || !l.covers(a.id, 5, pb) {
		t.Fatal("an older list replaced a newer one")
	}

	// The cross-check: of 10 listed peers a relayer is connected to, it
	// skips all but crossCheckPeers, a different draw each time; a peer
	// not on the list is never skipped, the author always. Made-up peers
	// padding the list change nothing.
	var listed []peer.ID
	var names []string
	for range 10 {
		x := newActor(t)
		p, _ := peer.Decode(x.id)
		listed = append(listed, p)
		names = append(names, x.id)
	}
	for range 54 {
		names = append(names, newActor(t).id) // padding: peers nobody is connected to
	}
	l.record(a.id, 7, parseTold(names))
	connected := append(slices.Clone(listed), pc, pa)
	picked := make(map[peer.ID]int)
	const tries = 200
	for range tries {
		skip := l.skips(a.id, 7, connected)
		if !skip[pa] || skip[pc] {
			t.Fatalf("skips %v: the author must be skipped, the unlisted peer never", skip)
		}
		n := 0
		for _, p := range listed {
			if !skip[p] {
				picked[p]++
				n++
			}
		}
		if n != crossCheckPeers {
			t.Fatalf("%d listed peers relayed to, want exactly %d", n, crossCheckPeers)
		}
	}
	for _, p := range listed {
		if picked[p] == 0 {
			t.Fatalf("listed peer %s never picked in %d draws: the picks are not random", p, tries)
		}
	}

	for i := range maxToldAuthors {
		l.record(newActorID(t, i), 1, parseTold([]string{b.id}))
	}
	if len(l.authors) != maxToldAuthors {
		t.Fatalf("%d authors remembered, want the bound %d: past it one is forgotten, not all", len(l.authors), maxToldAuthors)
	}
}

func newActorID(t *testing.T, _ int) string { return newActor(t).id }

// An equivocating author shows one entry to half its peers and another,
// at the same seq, to the rest, and names every peer on both lists so
// that nobody relays. The relayers' cross-checks still carry each branch
// to the other half within a hop: every node holds a proof of the fork
// within seconds, long before anti-entropy's first round (30 s). With
// crossCheckPeers at 0 this fails, and so it did, 6 runs in 6, with a
// chance per listed peer in place of the picks (the list is padded).
func TestAnEquivocatorNamingEveryPeerIsStillCaught(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 8
	honest := fullMesh(t, ctx, n)
	rogue := newFeedNode(t, ctx)
	for _, h := range honest {
		link(t, ctx, rogue, h)
	}
	time.Sleep(time.Second)
	author := rogue.h.ID().String()

	// Two branches at seq 1, each in a store of its own.
	branch := func(result string) (*ledger.Store, ledgerHead) {
		t.Helper()
		_, se, err := ledger.NewEntry(rogue.key, nil, ledger.TypeOutcome, []byte(`{"result":"`+result+`"}`), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		st, err := ledger.OpenStore(filepath.Join(t.TempDir(), result+".db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if err := st.Append(se); err != nil {
			t.Fatal(err)
		}
		return st, ledgerHead{Author: author, Seq: 1, CID: se.CID().String()}
	}
	stA, headA := branch("completed")
	stB, headB := branch("failed")
	serveA, serveB := New(rogue.h, stA, rogue.key, quietLog), New(rogue.h, stB, rogue.key, quietLog)
	sawA := make(map[peer.ID]bool)
	var told []string
	for i, h := range honest {
		sawA[h.h.ID()] = i < n/2
		told = append(told, h.h.ID().String())
	}
	// Padded to the most a list may name with peers nobody is connected
	// to: were the cross-check a chance per listed peer, this would make
	// it rare (about a third of runs would pass no branch on).
	for len(told) < maxPushPeers {
		told = append(told, newActor(t).id)
	}
	// Each peer is served the branch it was shown, over either protocol.
	serveShown := func(s network.Stream) {
		if sawA[s.Conn().RemotePeer()] {
			serveA.serve(s)
		} else {
			serveB.serve(s)
		}
	}
	lh := rogue.h.LibP2P()
	lh.SetStreamHandler(rogue.h.ProtocolID(ledgerSyncProto), serveShown)
	lh.SetStreamHandler(rogue.h.ProtocolID(ledgerSyncProto2), serveShown)

	start := time.Now()
	for _, h := range honest {
		head := headB
		if sawA[h.h.ID()] {
			head = headA
		}
		s, err := lh.NewStream(network.WithNoDial(ctx, "test"), h.h.ID(), rogue.h.ProtocolID(ledgerSyncProto2))
		if err != nil {
			t.Fatal(err)
		}
		if err := writeMsg(s, syncRequest{Kind: "have", Heads: []ledgerHead{head}, Told: told}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	// The lists were taken (else every node relays to every other and
	// the test proves nothing about them).
	for i, h := range honest {
		eventually(t, 5*time.Second, fmt.Sprintf("honest node %d holds the equivocator's list", i), func() bool {
			return h.f.told.covers(author, 1, honest[(i+1)%n].h.ID())
		})
	}
	for i, h := range honest {
		eventually(t, 5*time.Second, fmt.Sprintf("honest node %d freezes the equivocator's feed", i), func() bool {
			_, frozen := h.f.store.Frozen(author)
			return frozen
		})
		proof, _ := h.f.store.Frozen(author)
		if who, err := ledger.VerifyProof(proof); err != nil || who != author {
			t.Fatalf("node %d's proof: %v, %q", i, err, who)
		}
	}
	t.Logf("all %d nodes froze the feed %v after the two branches were shown", n, time.Since(start).Round(time.Millisecond))
}

// A peer the author reaches only through a relay is left off the list:
// sync does not use relayed connections, so it could not fetch from the
// author, and a hub must relay to it. The list still names the peers
// with a direct connection.
func TestAPeerBehindARelayIsNotOnTheList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The author must be able to dial a circuit: NAT services on.
	author := newFeedNodeWith(t, ctx, p2p.DHTMode("server"))
	proto2 := author.h.ProtocolID(ledgerSyncProto2)

	// A relay, and a home peer behind it that listens nowhere.
	relayHost, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.EnableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relayHost.Close() })
	r, err := relayv2.New(relayHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	relayInfo := peer.AddrInfo{ID: relayHost.ID(), Addrs: relayHost.Addrs()}
	home, err := libp2p.New(libp2p.NoListenAddrs, libp2p.EnableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = home.Close() })
	if err := home.Connect(ctx, relayInfo); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Reserve(ctx, home, relayInfo); err != nil {
		t.Fatalf("reserve a slot on the relay: %v", err)
	}

	// A directly connected peer that records the lists pushed to it.
	direct, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	lists := make(chan []string, 16)
	direct.SetStreamHandler(proto2, func(s network.Stream) {
		defer s.Close()
		raw, err := p2p.ReadFrame(s, maxSyncRequest)
		if err != nil {
			return
		}
		var req syncRequest
		if decodeMsg(raw, &req) == nil && req.Kind == "have" {
			lists <- req.Told
		}
	})
	lh := author.h.LibP2P()
	if err := lh.Connect(ctx, peer.AddrInfo{ID: direct.ID(), Addrs: direct.Addrs()}); err != nil {
		t.Fatal(err)
	}
	circuit := ma.StringCast(relayHost.Addrs()[0].String() + "/p2p/" + relayHost.ID().String() + "/p2p-circuit")
	if err := lh.Connect(network.WithAllowLimitedConn(ctx, "test"), peer.AddrInfo{ID: home.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatalf("connect through the relay: %v", err)
	}
	if c := lh.Network().Connectedness(home.ID()); c != network.Limited {
		t.Fatalf("the author's connection to the home peer is %v, want a relayed (limited) one", c)
	}
	if !slices.Contains(lh.Network().Peers(), home.ID()) {
		t.Fatal("the home peer is not among the author's peers: the test would prove nothing")
	}

	if _, err := author.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case told := <-lists:
		if slices.Contains(told, home.ID().String()) {
			t.Fatalf("the list %v names the peer reached only through a relay", told)
		}
		if !slices.Contains(told, direct.ID().String()) {
			t.Fatalf("the list %v leaves out the directly connected peer", told)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no push reached the directly connected peer")
	}
}

// fullMesh is n feed nodes, each linked to every other.
func fullMesh(t *testing.T, ctx context.Context, n int) []*feedNode {
	t.Helper()
	ns := make([]*feedNode, n)
	for i := range ns {
		ns[i] = newFeedNode(t, ctx)
	}
	for i := range ns {
		for j := i + 1; j < n; j++ {
			link(t, ctx, ns[i], ns[j])
		}
	}
	return ns
}

// covers (for the tests) says whether the author said it told p of its head at seq (or a
// later one); p being the author counts.
func (t *toldList) covers(author string, seq uint64, p peer.ID) bool {
	if p.String() == author {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.authors[author]
	if !ok || e.seq < seq {
		return false
	}
	_, told := e.peers[p]
	return told
}
