package replicate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	mh "github.com/multiformats/go-multihash"
)

type feedNode struct {
	h   *p2p.Host
	key crypto.PrivKey
	f   *Feeds
}

func newFeedNode(t *testing.T, ctx context.Context) *feedNode { return newFeedNodeTB(t, ctx) }

func newFeedNodeTB(t testing.TB, ctx context.Context) *feedNode {
	t.Helper()
	return newFeedNodeDHT(t, ctx, "server")
}

// newFeedNodeDHT is a feed node whose DHT runs in mode: a "client" is in
// no peer's routing table, so peers never learn of it from one another
// and meet it only by dialling it themselves (a spoke behind a hub).
func newFeedNodeDHT(t testing.TB, ctx context.Context, mode string) *feedNode {
	t.Helper()
	return newFeedNodeWith(t, ctx, p2p.DisableNATServices(), p2p.DHTMode(mode))
}

// newFeedNodeWith is a feed node on loopback with opts besides.
func newFeedNodeWith(t testing.TB, ctx context.Context, opts ...p2p.Option) *feedNode {
	t.Helper()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := p2p.New(ctx, append([]p2p.Option{p2p.Identity(key), p2p.Network("local"),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DiscoveryInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := New(h, st, key, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return &feedNode{h: h, key: key, f: f}
}

func link(t *testing.T, ctx context.Context, a, b *feedNode) { linkTB(t, ctx, a, b) }

// linkTB connects a to b. A dial may fail once on a loaded machine (a
// handshake cut short when both ends dial each other at once, as CI saw
// it: "noise: message is too short"); Connect is idempotent, so it is
// tried again without the swarm's dial backoff, and only a third failure
// fails the test.
func linkTB(t testing.TB, ctx context.Context, a, b *feedNode) {
	t.Helper()
	var err error
	for try := range 3 {
		if err = a.h.Connect(ctx, peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.LibP2P().Addrs()}); err == nil {
			return
		}
		if a.h.LibP2P().Network().Connectedness(b.h.ID()) == network.Connected {
			return // b's own dial to a won the race
		}
		if sw, ok := a.h.LibP2P().Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(b.h.ID()) // else the next try is refused as "dial backoff"
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
	t.Fatal(err)
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

	cidA, err := rogue.f.Append(ledger.TypeOutcome, []byte(`{"result":"completed"}`))
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
		c, err := a.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		last = c
	}
	link(t, ctx, b, a)
	if err := b.f.Reconcile(ctx, a.h.ID()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "b holds a's feed", func() bool {
		got := headOf(b, a.h.ID().String())
		return got.Seq == 20 && got.CID.String() == last
	})
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
			if _, err := n.f.Append(ledger.TypeOutcome, []byte(`{"side":1}`)); err != nil {
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
	alt := New(n.h, st, n.key, n.f.log)
	n.h.LibP2P().SetStreamHandler(n.h.ProtocolID(ledgerSyncProto), alt.serve)
	n.h.LibP2P().SetStreamHandler(n.h.ProtocolID(ledgerSyncProto2), alt.serve)
}

// fakeHeads makes n well-formed heads of distinct made-up authors: what a
// hostile peer can produce for free, since a peer ID is only a key.
func fakeHeads(t testing.TB, n int, seq uint64) []ledgerHead {
	t.Helper()
	c := cid.NewCidV1(cid.DagCBOR, mustSum(t, []byte("any entry"))).String()
	out := make([]ledgerHead, n)
	buf := make([]byte, 32)
	for i := range out {
		_, _ = rand.Read(buf)
		pk, err := crypto.UnmarshalEd25519PublicKey(buf)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pk)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ledgerHead{Author: id.String(), Seq: seq, CID: c}
	}
	return out
}

func mustSum(t testing.TB, b []byte) mh.Multihash {
	h, err := mh.Sum(b, mh.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestWantListBounds: the wait list a node keeps of feeds to fetch stays
// within its caps whatever peers announce: 100,000 authors from one peer
// leave exactly its share, sybil peers together at most the whole list,
// the share refills only at the peer's rate, a huge sequence number costs
// no more than a small one, and past maxForeignFeeds only feeds of peers
// we deal with or asked for are taken.
func TestWantListBounds(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	heads := fakeHeads(t, 100_000, 1<<62)
	hostile := peer.ID("hostile")

	wl := newWantList()
	for _, h := range heads {
		wl.offer(h.Author, h.Seq, 0, hostile, true, false, t0)
	}
	st := wl.stats()
	if st.pending != maxPendingPerPeer || st.byPeer[hostile] != maxPendingPerPeer {
		t.Fatalf("one peer announcing 100k authors: %d pending (%d its), want its share %d", st.pending, st.byPeer[hostile], maxPendingPerPeer)
	}
	if got := st.refused[refusePeerQuota]; got != len(heads)-maxPendingPerPeer {
		t.Fatalf("refused for the peer's share: %d, want %d (%v)", got, len(heads)-maxPendingPerPeer, st.refused)
	}
	// Fetching them all fails (the peer holds nothing); the share frees,
	// but the budget refills at peerRate only.
	for {
		ts, _ := wl.next(context.Background(), maxRangesPerRequest)
		if len(ts) == 0 {
			break
		}
		for _, tk := range ts {
			wl.drop(tk.author)
		}
		if wl.stats().queued == 0 {
			break
		}
	}
	if st := wl.stats(); st.pending != 0 {
		t.Fatalf("after dropping: %d pending", st.pending)
	}
	admitted := 0
	for _, h := range heads[:2*peerBurst] {
		if wl.offer(h.Author, h.Seq, 0, hostile, true, false, t0.Add(time.Second)) == refuseNone {
			admitted++
		}
	}
	if admitted != peerRate {
		t.Fatalf("a second after spending its budget a peer added %d feeds, want %d", admitted, peerRate)
	}

	// Sybils: many peers, each with its own share, fill the list and no
	// more.
	wl = newWantList()
	for i, h := range heads {
		wl.offer(h.Author, h.Seq, 0, peer.ID(fmt.Sprintf("sybil-%d", i%50)), true, false, t0)
	}
	if st := wl.stats(); st.pending != maxPending {
		t.Fatalf("50 sybils: %d pending, want the cap %d", st.pending, maxPending)
	}

	// Storage bound: at maxForeignFeeds held, a new feed is fetched only
	// if its author is connected to us or it was asked for; feeds already
	// held go on updating.
	wl = newWantList()
	wl.held = maxForeignFeeds
	friend := peer.ID("friend")
	if why := wl.offer(heads[0].Author, 1, 0, friend, true, false, t0); why != refuseForeignCap {
		t.Fatalf("a stranger's feed past the cap: %q, want %q", why, refuseForeignCap)
	}
	if why := wl.offer(heads[1].Author, 1, 0, friend, true, true, t0); why != refuseNone {
		t.Fatalf("the feed of a peer we deal with past the cap: %q", why)
	}
	if !wl.follow(heads[2].Author) {
		t.Fatal("follow refused")
	}
	if why := wl.offer(heads[2].Author, 1, 0, friend, true, false, t0); why != refuseNone {
		t.Fatalf("a followed feed past the cap: %q", why)
	}
	if why := wl.offer(heads[3].Author, 9, 0, friend, false, false, t0); why != refuseNone {
		t.Fatalf("a held feed past the cap: %q", why)
	}
	for _, h := range heads[10 : 10+maxFollowed] {
		wl.follow(h.Author)
	}
	if wl.follow(heads[5].Author) {
		t.Fatalf("follow took more than %d feeds", maxFollowed)
	}

	// A want keeps at most maxSources sources, however many peers claim
	// the feed, and the sweep forgets old wants and refilled budgets.
	wl = newWantList()
	for i := range 100 {
		wl.offer(heads[0].Author, uint64(i+1), 0, peer.ID(fmt.Sprintf("p%d", i)), true, false, t0)
	}
	ts, _ := wl.next(context.Background(), 1)
	if len(ts) != 1 || len(ts[0].sources) != maxSources || ts[0].seq != 100 {
		t.Fatalf("want after 100 announcers: %+v", ts)
	}
	if _, ok := ts[0].sources["p99"]; !ok {
		t.Fatalf("the source holding most was not kept: %v", ts[0].sources)
	}
	wl.settle(heads[0].Author, 0, 0, "", nil)
	wl.sweep(t0.Add(pendingTTL + time.Hour))
	if st := wl.stats(); st.pending != 0 || st.budgets != 0 || st.peers != 0 {
		t.Fatalf("after the sweep: %+v", st)
	}

	// A liar claims seq 2^62, an honest peer seq 3; once we hold 3 and
	// the liar has failed maxSourceFails times, the want ends rather
	// than cycling through the workers.
	wl = newWantList()
	wl.offer(heads[0].Author, 1<<62, 0, "liar", true, false, t0)
	wl.offer(heads[0].Author, 3, 0, "honest", true, false, t0)
	for i := range maxSourceFails {
		ts, _ := wl.next(context.Background(), 1)
		if len(ts) != 1 {
			t.Fatalf("round %d: %+v", i, ts)
		}
		wl.mu.Lock()
		w := wl.wants[heads[0].Author]
		wl.mu.Unlock()
		wl.settle(heads[0].Author, 3, 0, "liar", nil)
		if w != nil {
			// Skip the back-off.
			wl.mu.Lock()
			if cur := wl.wants[heads[0].Author]; cur == w && w.busy {
				w.busy = false
				wl.enqueue(heads[0].Author, w)
			}
			wl.mu.Unlock()
		}
	}
	if st := wl.stats(); st.pending != 0 || st.queued != 0 {
		t.Fatalf("the liar's want outlived its failures: %+v", st)
	}
}

// hostileNode is a feed node whose sync handler is replaced: it answers
// heads requests with heads, range requests with nothing (or with what
// ranges returns), and records what it was asked.
type hostileNode struct {
	*feedNode
	mu     sync.Mutex
	asked  []syncRequest
	heads  []ledgerHead
	ranges *ledger.Store // serve ranges from here; nil: serve nothing
}

func newHostileNode(t *testing.T, ctx context.Context) *hostileNode {
	hn := &hostileNode{feedNode: newFeedNode(t, ctx)}
	hn.h.LibP2P().SetStreamHandler(hn.h.ProtocolID(ledgerSyncProto), func(s network.Stream) {
		defer s.Close()
		var req syncRequest
		if err := readMsg(s, maxMsgFrame, &req); err != nil {
			return
		}
		hn.mu.Lock()
		hn.asked = append(hn.asked, req)
		heads, st := hn.heads, hn.ranges
		hn.mu.Unlock()
		switch req.Kind {
		case "heads":
			b, _ := json.Marshal(heads)
			_ = p2p.WriteFrame(s, b, len(b))
		case "ranges":
			for _, r := range req.Ranges {
				if st != nil {
					es, _ := st.Range(r.Author, r.From, r.To)
					for _, se := range es {
						raw, _ := se.Marshal()
						_ = p2p.WriteFrame(s, raw, len(raw))
					}
				}
				_ = p2p.WriteFrame(s, nil, 1)
			}
		}
	})
	return hn
}

// have pushes heads to n as a "have" message, like a peer that just
// stored them.
func (hn *hostileNode) have(ctx context.Context, n *feedNode, heads []ledgerHead) error {
	s, err := hn.h.LibP2P().NewStream(ctx, n.h.ID(), hn.h.ProtocolID(ledgerSyncProto))
	if err != nil {
		return err
	}
	defer s.Close()
	return writeMsg(s, syncRequest{Kind: "have", Heads: heads})
}

// TestHostilePeerCannotGrowPendingState: a connected peer announces
// 100,000 made-up authors by "have" pushes and by a heads response, and
// serves none of them. The node's wait list never holds more than the
// peer's share, oversized messages are refused whole, the wait list
// drains once the fetches fail, and an honest peer's feed still
// replicates meanwhile.
func TestHostilePeerCannotGrowPendingState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	victim, honest := newFeedNode(t, ctx), newFeedNode(t, ctx)
	hostile := newHostileNode(t, ctx)
	link(t, ctx, victim, honest)
	link(t, ctx, hostile.feedNode, victim)
	heads := fakeHeads(t, 100_000, 1<<62)

	// Too many heads in one push: refused whole.
	if err := hostile.have(ctx, victim, heads[:maxHeadsPerMsg+1]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if st := victim.f.wants.stats(); st.pending != 0 {
		t.Fatalf("an oversized push left %d pending", st.pending)
	}

	start := time.Now()
	peak := 0
	for lo := 0; lo < len(heads); lo += maxHeadsPerMsg {
		if err := hostile.have(ctx, victim, heads[lo:min(len(heads), lo+maxHeadsPerMsg)]); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, victim.f.wants.stats().byPeer[hostile.h.ID()])
		if lo == 100*maxHeadsPerMsg {
			if _, err := honest.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // the last pushes are taken in
	st := victim.f.wants.stats()
	elapsed := time.Since(start)
	peak = max(peak, st.byPeer[hostile.h.ID()])
	if peak > maxPendingPerPeer || st.pending > maxPendingPerPeer+1 {
		t.Fatalf("the hostile peer's pending feeds peaked at %d (%d in all), over its share %d", peak, st.pending, maxPendingPerPeer)
	}
	admitted := st.admitted - 1 // the honest feed
	if limit := peerBurst + int(elapsed.Seconds()*peerRate) + peerRate; admitted > limit {
		t.Fatalf("%d feeds admitted in %v, over the budget %d", admitted, elapsed, limit)
	}
	t.Logf("100k authors announced in %v: %d admitted, peak pending %d, refused %v", elapsed, admitted, peak, st.refused)

	// A heads response of 100k heads is over the frame limit, and one of
	// maxHeadsServed+1 small heads over the count: both refused whole.
	hostile.mu.Lock()
	hostile.heads = heads
	hostile.mu.Unlock()
	if err := victim.f.Reconcile(ctx, hostile.h.ID()); err == nil {
		t.Fatal("a 100k heads response was taken")
	}
	hostile.mu.Lock()
	hostile.heads = heads[:maxHeadsServed+1]
	hostile.mu.Unlock()
	if err := victim.f.Reconcile(ctx, hostile.h.ID()); err == nil {
		t.Fatalf("a response of %d heads was taken", maxHeadsServed+1)
	}

	eventually(t, 30*time.Second, "the honest feed replicates", func() bool {
		return headOf(victim, honest.h.ID().String()).Seq == 1
	})
	eventually(t, 30*time.Second, "the wait list drains", func() bool {
		return victim.f.wants.stats().pending == 0
	})
	hostile.mu.Lock()
	defer hostile.mu.Unlock()
	for _, req := range hostile.asked {
		if req.Kind == "ranges" && len(req.Ranges) > maxRangesPerRequest {
			t.Fatalf("asked for %d feeds in one request", len(req.Ranges))
		}
	}
}

// TestHugeSeqIsFetchedInBoundedSteps: a peer claims its feed reaches seq
// 2^62 but holds three entries. The node fetches the three, asks for at
// most maxSyncEntries at a time, and gives up on the rest.
func TestHugeSeqIsFetchedInBoundedSteps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	victim := newFeedNode(t, ctx)
	liar := newHostileNode(t, ctx)
	var last string
	for range 3 {
		c, err := liar.f.Append(ledger.TypeOutcome, []byte(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		last = c
	}
	liar.mu.Lock()
	liar.ranges = liar.f.store
	liar.mu.Unlock()
	link(t, ctx, liar.feedNode, victim)
	author := liar.h.ID().String()
	if err := liar.have(ctx, victim, []ledgerHead{{Author: author, Seq: 1 << 62, CID: last}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the three real entries arrive", func() bool {
		return headOf(victim, author).Seq == 3
	})
	eventually(t, 10*time.Second, "the node gives up on the rest", func() bool {
		return victim.f.wants.stats().pending == 0
	})
	liar.mu.Lock()
	defer liar.mu.Unlock()
	asked := 0
	for _, req := range liar.asked {
		for _, r := range req.Ranges {
			asked++
			if r.To-r.From+1 > maxSyncEntries {
				t.Fatalf("asked for %d..%d, over %d entries", r.From, r.To, maxSyncEntries)
			}
		}
	}
	if asked == 0 || asked > 1+maxSourceFails {
		t.Fatalf("%d range requests, want 1..%d", asked, 1+maxSourceFails)
	}
}

// TestLongFeedsReplicateInBoundedRequests: a peer holds five feeds of 300
// entries; a node that lacks them all fetches them in requests of at most
// maxSyncEntries entries a feed and maxEntriesPerRequest in all, and ends
// up with every entry.
func TestLongFeedsReplicateInBoundedRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newHostileNode(t, ctx)
	want := map[string]uint64{}
	for range 5 {
		key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
		var prev *ledger.Entry
		var batch []*ledger.SignedEntry
		for range 300 {
			e, se, err := ledger.NewEntry(key, prev, ledger.TypeOutcome, []byte(`{"n":1}`), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			prev, batch = e, append(batch, se)
		}
		if _, err := holder.f.store.AppendBatch(batch); err != nil {
			t.Fatal(err)
		}
		want[prev.Author] = 300
	}
	hs, err := holder.f.store.Heads()
	if err != nil {
		t.Fatal(err)
	}
	holder.mu.Lock()
	holder.ranges = holder.f.store
	for _, h := range hs {
		holder.heads = append(holder.heads, ledgerHead{Author: h.Author, Seq: h.Seq, CID: h.CID.String()})
	}
	holder.mu.Unlock()

	n := newFeedNode(t, ctx)
	link(t, ctx, n, holder.feedNode)
	eventually(t, 30*time.Second, "all 1,500 entries replicate", func() bool {
		for author, seq := range want {
			if headOf(n, author).Seq != seq {
				return false
			}
		}
		return true
	})
	holder.mu.Lock()
	defer holder.mu.Unlock()
	for _, req := range holder.asked {
		total := uint64(0)
		for _, r := range req.Ranges {
			if r.To-r.From+1 > maxSyncEntries {
				t.Fatalf("asked for %d..%d of a feed, over %d entries", r.From, r.To, maxSyncEntries)
			}
			total += r.To - r.From + 1
		}
		if total > maxEntriesPerRequest {
			t.Fatalf("asked for %d entries in one request, over %d", total, maxEntriesPerRequest)
		}
	}
}

// Past the cap on foreign feeds, a new feed is fetched for a peer the node
// deals with, never merely because its author is connected.
func TestForeignFeedCapLetsCounterpartiesIn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nd, other := newFeedNodeTB(t, ctx), newFeedNodeTB(t, ctx)
	linkTB(t, ctx, nd, other)
	nd.f.wants.mu.Lock()
	nd.f.wants.held = maxForeignFeeds
	nd.f.wants.mu.Unlock()
	stranger, partner := newActor(t), newActor(t)
	head := func(a actor) ledgerHead {
		_, se, err := ledger.NewEntry(a.key, nil, ledger.TypeOutcome, []byte(`{}`), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ledgerHead{Author: a.id, Seq: 1, CID: se.CID().String()}
	}
	if got := nd.f.offer(head(stranger), other.h.ID()); got != refuseForeignCap {
		t.Fatalf("a stranger's new feed past the cap: %q", got)
	}
	deals := func(a string) bool { return a == partner.id }
	nd.f.Counterparty.Store(&deals)
	if got := nd.f.offer(head(partner), other.h.ID()); got != refuseNone {
		t.Fatalf("a counterparty's new feed past the cap: %q", got)
	}
	if got := nd.f.offer(head(stranger), other.h.ID()); got != refuseForeignCap {
		t.Fatalf("a stranger's new feed past the cap, with counterparties set: %q", got)
	}
}
