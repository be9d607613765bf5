package replicate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// syncBuf is a log sink tests read while the node writes to it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startFeedNode starts replication with identity key over the ledger at
// dbPath, as a node's start does; stop ends it as a node's stop does.
func startFeedNode(t testing.TB, ctx context.Context, key crypto.PrivKey, dbPath string, rec RecoverOptions, log *slog.Logger) (n *feedNode, stop func()) {
	t.Helper()
	h, err := p2p.New(ctx, p2p.Identity(key), p2p.Network("local"), p2p.DisableNATServices(),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DHTMode("server"), p2p.DiscoveryInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.OpenStore(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	f := New(h, st, key, log)
	f.Recovery = rec
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = f.Stop(sctx)
			h.Close()
			st.Close()
		})
	}
	t.Cleanup(stop)
	return &feedNode{h: h, key: key, f: f}, stop
}

func noProofAnywhere(t *testing.T, author string, ns ...*feedNode) {
	t.Helper()
	for _, n := range ns {
		if _, frozen := n.f.store.Frozen(author); frozen {
			t.Fatalf("node %s holds an equivocation proof against %s", n.h.ID(), author)
		}
	}
}

// TestLostLedgerRecoversOwnFeedFromPeers: A journals entries that B and C
// replicate; A stops and its ledger.db is moved aside, as the damaged-file
// advice says. Started again, A must fetch its own feed back before it
// appends, so that its next entry continues the chain (seq n+1 on the old
// head) and B and C take it: no fork, no proof against an honest node.
// Without the recovery A's next entry would be a second seq 1.
func TestLostLedgerRecoversOwnFeedFromPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	dir := t.TempDir()
	dbA := filepath.Join(dir, "ledger.db")
	a, stopA := startFeedNode(t, ctx, key, dbA, RecoverOptions{Await: true}, quietLog)
	b, c := newFeedNode(t, ctx), newFeedNode(t, ctx)
	link(t, ctx, a, b)
	link(t, ctx, b, c)
	const n = 300 // more than one request's worth (maxSyncEntries)
	for i := range n {
		if _, err := a.f.Append(ledger.TypeOutcome, []byte(`{"n":`+strconv.Itoa(i)+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	self := a.h.ID().String()
	old := headOf(a, self)
	eventually(t, 30*time.Second, "B and C hold A's feed", func() bool {
		return headOf(b, self).Seq == n && headOf(c, self).Seq == n
	})

	stopA()
	if err := os.Rename(dbA, dbA+".damaged"); err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	a, _ = startFeedNode(t, ctx, key, dbA, RecoverOptions{Await: true, Settle: 300 * time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, nil)))
	link(t, ctx, a, b)
	link(t, ctx, a, c)

	start := time.Now()
	cs, err := a.f.Append(ledger.TypeOutcome, []byte(`{"n":"after"}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the first append waited %v", d)
	}
	head := headOf(a, self)
	if head.Seq != n+1 || head.CID.String() != cs {
		t.Fatalf("A's head after restart = seq %d %s, want seq %d %s", head.Seq, head.CID, n+1, cs)
	}
	e, _, err := a.f.store.Get(head.CID)
	if err != nil || e.Prev != old.CID.String() {
		t.Fatalf("A's next entry prev = %v (err %v), want the old head %s", e, err, old.CID)
	}
	eventually(t, 30*time.Second, "B and C take A's next entry", func() bool {
		return headOf(b, self).Seq == n+1 && headOf(c, self).Seq == n+1
	})
	noProofAnywhere(t, self, a, b, c)
	if !bytes.Contains([]byte(logs.String()), []byte("recovered this node's own ledger feed from peers: 300 entries")) {
		t.Fatalf("no recovery in the log:\n%s", logs.String())
	}
}

// TestFreshNodeStartsAtOneWhenPeersHoldNothing: a node with nothing to
// recover starts its feed at seq 1 as soon as enough peers said they hold
// nothing of it, not after the full wait.
func TestFreshNodeStartsAtOneWhenPeersHoldNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	// Settle as long as Wait: only the answers of the quorum can end it early.
	rec := RecoverOptions{Await: true, Quorum: 2, Wait: 30 * time.Second, Settle: 30 * time.Second, Alone: 30 * time.Second}
	a, _ := startFeedNode(t, ctx, key, filepath.Join(t.TempDir(), "ledger.db"), rec, quietLog)
	b, c := newFeedNode(t, ctx), newFeedNode(t, ctx)
	if _, err := b.f.Append(ledger.TypeOutcome, []byte(`{}`)); err != nil { // B holds a feed, not A's
		t.Fatal(err)
	}
	link(t, ctx, a, b)
	link(t, ctx, a, c)
	start := time.Now()
	if _, err := a.f.Append(ledger.TypeOutcome, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the first append waited %v although both peers said they hold nothing", d)
	}
	if h := headOf(a, a.h.ID().String()); h.Seq != 1 {
		t.Fatalf("A's first entry is seq %d, want 1", h.Seq)
	}
}

// TestAloneNodeStartsAfterTheBound: with no peer at all, appends wait the
// Alone bound and no longer.
func TestAloneNodeStartsAfterTheBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	a, _ := startFeedNode(t, ctx, key, filepath.Join(t.TempDir(), "ledger.db"), RecoverOptions{Await: true, Alone: 500 * time.Millisecond}, quietLog)
	start := time.Now()
	if _, err := a.f.Append(ledger.TypeOutcome, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 10*time.Second {
		t.Fatalf("the first append waited %v, want about the 500ms bound", d)
	}
	if h := headOf(a, a.h.ID().String()); h.Seq != 1 {
		t.Fatalf("A's first entry is seq %d, want 1", h.Seq)
	}
}

// TestRecoveryTakesTheLongestBranch: a fork of A's feed exists already (B
// holds one branch of 5, C another of 8, signed by A's key). A, started on
// an empty ledger, keeps the longest valid chain and continues it.
func TestRecoveryTakesTheLongestBranch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	b, c := newFeedNode(t, ctx), newFeedNode(t, ctx)
	// B is behind (the first 5 of the 8 entries C holds): two branches
	// that differ would be the author's equivocation, which B and C
	// replicating it between them may catch first and freeze the feed
	// (a race this test lost about one run in five).
	long := signedChain(t, key, 8, "long")
	short := long[:5]
	for _, x := range []struct {
		n  *feedNode
		es []*ledger.SignedEntry
	}{{b, short}, {c, long}} {
		if errs, err := x.n.f.store.AppendBatch(x.es); err != nil || len(errs) != len(x.es) || errorsIn(errs) {
			t.Fatal(err, errs)
		}
	}
	a, _ := startFeedNode(t, ctx, key, filepath.Join(t.TempDir(), "ledger.db"), RecoverOptions{Await: true, Quorum: 2}, quietLog)
	link(t, ctx, a, b)
	link(t, ctx, a, c)
	if _, err := a.f.Append(ledger.TypeOutcome, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	self := a.h.ID().String()
	if h := headOf(a, self); h.Seq != 9 {
		t.Fatalf("A's head = seq %d, want 9 (the long branch, continued)", h.Seq)
	}
	got, err := a.f.store.Range(self, 8, 8)
	if err != nil || len(got) != 1 || got[0].CID() != long[7].CID() {
		t.Fatalf("A's entry 8 is not the long branch's: %v %v", got, err)
	}
}

// signedChain is n entries of key's feed, from seq 1; tag makes branches
// differ.
func signedChain(t testing.TB, key crypto.PrivKey, n int, tag string) []*ledger.SignedEntry {
	t.Helper()
	var prev *ledger.Entry
	out := make([]*ledger.SignedEntry, 0, n)
	for i := range n {
		e, se, err := ledger.NewEntry(key, prev, ledger.TypeOutcome, []byte(`{"tag":"`+tag+`","n":`+strconv.Itoa(i)+`}`), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		prev, out = e, append(out, se)
	}
	return out
}

func errorsIn(errs []error) bool {
	for _, e := range errs {
		if e != nil {
			return true
		}
	}
	return false
}

// TestStopDuringRecoveryRefusesAppends: a node stopped before its own feed
// was recovered refuses what waits (the journal drains into Append at
// stop) instead of appending it as a new seq 1.
func TestStopDuringRecoveryRefusesAppends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	a, stop := startFeedNode(t, ctx, key, filepath.Join(t.TempDir(), "ledger.db"), RecoverOptions{Await: true, Alone: time.Minute}, quietLog)
	errc := make(chan error, 1)
	go func() { _, err := a.f.Append(ledger.TypeOutcome, []byte(`{}`)); errc <- err }()
	time.Sleep(200 * time.Millisecond)
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	if err := a.f.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, errStopping) {
		t.Fatalf("append during recovery at stop: err = %v, want errStopping", err)
	}
	if _, err := a.f.Append(ledger.TypeOutcome, []byte(`{}`)); !errors.Is(err, errStopping) {
		t.Fatalf("append after stop: err = %v, want errStopping", err)
	}
	if h := headOf(a, a.h.ID().String()); h.Seq != 0 {
		t.Fatalf("A appended seq %d although its feed was never recovered", h.Seq)
	}
	stop()
}

// ownFeedLiar is a peer whose sync handler answers a "head" request with
// head (or, stall set, answers nothing until the asker gives up), serves
// no entries, and counts the ranges it was asked for. Other requests it
// closes at once, so that only the recovery meets the stall.
type ownFeedLiar struct {
	*feedNode
	mu     sync.Mutex
	ranges []syncRange
}

func newOwnFeedLiar(t *testing.T, ctx context.Context, head []ledgerHead, stall bool) *ownFeedLiar {
	l := &ownFeedLiar{feedNode: newFeedNode(t, ctx)}
	l.h.LibP2P().SetStreamHandler(l.h.ProtocolID(ledgerSyncProto), func(s network.Stream) {
		defer s.Close()
		var req syncRequest
		if err := readMsg(s, maxMsgFrame, &req); err != nil {
			return
		}
		switch {
		case stall && req.Kind == "head":
			_, _ = io.Copy(io.Discard, s) // until the asker's deadline closes it
		case req.Kind == "head":
			b, _ := json.Marshal(head)
			_ = p2p.WriteFrame(s, b, len(b))
		case req.Kind == "ranges":
			l.mu.Lock()
			l.ranges = append(l.ranges, req.Ranges...)
			l.mu.Unlock()
			for range req.Ranges {
				_ = p2p.WriteFrame(s, nil, 1) // holds nothing of it
			}
		}
	})
	return l
}

// TestRecoveryBoundedAgainstLyingPeers: A, on an empty ledger, asks four
// peers for its own feed. B holds it (300 entries); one liar claims it
// reaches seq 10^12 and serves nothing, one answers with another author's
// head, one never answers. A fetches the liar's claim once, in one bounded
// request, and gives up on it (entries are A's own signed ones: nobody can
// make up the rest); the other author's head is refused; the silent peer
// holds the appends up for Wait, not for its whole exchange timeout; and
// A continues its real chain from B.
func TestRecoveryBoundedAgainstLyingPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	const n = 300
	chain := signedChain(t, key, n, "real")
	b := newFeedNode(t, ctx)
	if errs, err := b.f.store.AppendBatch(chain); err != nil || errorsIn(errs) {
		t.Fatal(err, errs)
	}
	self, _ := peer.IDFromPrivateKey(key)
	last := chain[n-1].CID().String()
	huge := newOwnFeedLiar(t, ctx, []ledgerHead{{Author: self.String(), Seq: 1_000_000_000_000, CID: last}}, false)
	other := newFeedNode(t, ctx).h.ID().String()
	// Longer than any claim of A's own: taken, it would be fetched first.
	wrong := newOwnFeedLiar(t, ctx, []ledgerHead{{Author: other, Seq: 2_000_000_000_000, CID: last}}, false)
	silent := newOwnFeedLiar(t, ctx, nil, true)

	// Settle short, Wait shorter than syncTimeout: only Wait ends the
	// asking while the silent peer's question is open.
	rec := RecoverOptions{Await: true, Settle: 300 * time.Millisecond, Wait: 2 * time.Second}
	a, _ := startFeedNode(t, ctx, key, filepath.Join(t.TempDir(), "ledger.db"), rec, quietLog)
	for _, p := range []*feedNode{huge.feedNode, wrong.feedNode, silent.feedNode, b} {
		link(t, ctx, a, p)
	}
	start := time.Now()
	if _, err := a.f.Append(ledger.TypeOutcome, []byte(`{"n":"after"}`)); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("the first append waited %v", d)
	if d >= syncTimeout-time.Second {
		t.Fatalf("the first append waited %v: the silent peer held it up past Wait (%v)", d, rec.Wait)
	}
	head := headOf(a, self.String())
	e, _, err := a.f.store.Get(head.CID)
	if head.Seq != n+1 || err != nil || e.Prev != last {
		t.Fatalf("A's head = seq %d (prev %v, err %v), want seq %d on the real chain's head %s", head.Seq, e, err, n+1, last)
	}
	huge.mu.Lock()
	asked := slices.Clone(huge.ranges)
	huge.mu.Unlock()
	wrong.mu.Lock()
	fromWrong := len(wrong.ranges)
	wrong.mu.Unlock()
	if fromWrong != 0 {
		t.Fatalf("A fetched its own feed from a peer that answered with another author's head")
	}
	if len(asked) != 1 || asked[0].From != 1 || asked[0].To-asked[0].From+1 > maxSyncEntries {
		t.Fatalf("the liar claiming 10^12 entries was asked for %+v, want one range of at most %d from seq 1", asked, maxSyncEntries)
	}
	noProofAnywhere(t, self.String(), a, b)
	// The silent peer's question ended with the asking: it does not hold
	// the node's stop up until its exchange times out.
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	if err := a.f.Stop(sctx); err != nil {
		t.Fatalf("stop after the recovery: %v", err)
	}
}
