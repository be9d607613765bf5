package replicate

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The serving slots are shared out: one peer gets maxServingPerPeer, the
// node maxServing in all, a waiter gets a slot that is given back while
// it waits, and a peer holding none leaves nothing behind.
func TestServingSlotsShareOutPerPeer(t *testing.T) {
	sl := newServingSlots()
	a, b := peer.ID("a"), peer.ID("b")
	for i := range maxServingPerPeer {
		if !sl.take(a, 0) {
			t.Fatalf("slot %d of peer a refused", i)
		}
	}
	if sl.take(a, 20*time.Millisecond) {
		t.Fatalf("peer a got more than its %d slots", maxServingPerPeer)
	}
	if !sl.take(b, 0) {
		t.Fatal("peer b refused while a held its share")
	}
	// Fill the node from more peers, then one more must wait.
	held := []peer.ID{a, a, a, a, b}
	for i := 0; len(held) < maxServing; i++ {
		p := peer.ID(rune('c' + i/maxServingPerPeer))
		if !sl.take(p, 0) {
			t.Fatalf("slot %d refused", len(held))
		}
		held = append(held, p)
	}
	if sl.take("z", 20*time.Millisecond) {
		t.Fatalf("more than %d slots taken", maxServing)
	}
	got := make(chan bool)
	go func() { got <- sl.take("z", 5*time.Second) }()
	time.Sleep(20 * time.Millisecond)
	sl.give(held[0])
	if !<-got {
		t.Fatal("a waiter did not get the slot given back")
	}
	held[0] = "z"
	for _, p := range held {
		sl.give(p)
	}
	if used, peers := sl.stats(); used != 0 || peers != 0 {
		t.Fatalf("after every slot was given back: %d used, %d peers remembered", used, peers)
	}
}

// newBareHost is a host of the feed nodes' network with nothing on it: a
// hostile peer's client.
func newBareHost(t testing.TB, ctx context.Context) *p2p.Host {
	t.Helper()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := p2p.New(ctx, p2p.Identity(key), p2p.Network("local"), p2p.DisableNATServices(), p2p.Logger(quietLog),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DHTMode("client"), p2p.DiscoveryInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// syncAttack is how a hostile peer ties up a node's ledger sync.
type syncAttack int

const (
	// stallRequests: open streams, send the first byte of a request, stall.
	stallRequests syncAttack = iota
	// holdAnswers: send whole heads requests and never read the answers,
	// so that each answer (larger than a stream window) blocks its writer.
	holdAnswers
)

func (a syncAttack) String() string { return [...]string{"stall-requests", "hold-answers"}[a] }

// attackSync keeps streams streams of attack a open from h to victim
// until ctx ends. A stalled request is opened again whenever the victim
// resets it; an answer, once it begins to arrive, is held unread until
// ctx ends (the victim gives up on it after syncTimeout, longer than the
// honest requests take). It returns how many streams were opened.
func attackSync(ctx context.Context, h *p2p.Host, victim peer.ID, a syncAttack, streams int) *atomic.Int64 {
	req, _ := json.Marshal(syncRequest{Kind: "heads"})
	msg := binary.AppendUvarint(nil, uint64(len(req)))
	if a == stallRequests {
		msg = append(msg, req[0])
	} else {
		msg = append(msg, req...)
	}
	opened := new(atomic.Int64)
	for range streams {
		go func() {
			for ctx.Err() == nil {
				s, err := h.LibP2P().NewStream(ctx, victim, h.ProtocolID(ledgerSyncProto))
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
				if _, err := s.Write(msg); err == nil {
					opened.Add(1)
					// Stalled, this returns when the victim resets the
					// stream; against answers, when the answer begins.
					if _, err := s.Read(make([]byte, 1)); err == nil && a == holdAnswers {
						<-ctx.Done()
					}
				}
				stop()
				_ = s.Reset()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	return opened
}

// honestHeads makes n heads requests (reconcile, as anti-entropy does)
// from honest to victim, at most maxReconciles at once, and returns how
// many succeeded.
func honestHeads(ctx context.Context, honest *feedNode, victim peer.ID, n int) int {
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if honest.f.Reconcile(ctx, victim) == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// shareFeeds stores n one-entry feeds of made-up authors in every node's
// store, so that a heads answer is larger than one stream window (256 KiB)
// while none of the nodes has anything to fetch from another.
func shareFeeds(t testing.TB, n int, ns ...*feedNode) {
	t.Helper()
	ses := make([]*ledger.SignedEntry, n)
	for i := range ses {
		key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
		_, se, err := ledger.NewEntry(key, nil, ledger.TypeOutcome, []byte(`{"result":"completed"}`), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ses[i] = se
	}
	for _, fn := range ns {
		errs, err := fn.f.store.AppendBatch(ses)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// syncStreamsFrom counts the ledger-sync streams n holds open with peers.
func syncStreamsFrom(n *feedNode, peers []*p2p.Host) int {
	count := 0
	for _, h := range peers {
		for _, c := range n.h.LibP2P().Network().ConnsToPeer(h.ID()) {
			for _, s := range c.GetStreams() {
				if s.Protocol() == n.h.ProtocolID(ledgerSyncProto) {
					count++
				}
			}
		}
	}
	return count
}

// syncUnderAttack sets up a victim, an honest peer and the given number of
// hostile peers running attack a over 64 streams in all (twice
// maxServing), then makes 16 honest heads requests of the victim and
// returns how many succeeded and how long the 16 took.
func syncUnderAttack(t testing.TB, a syncAttack, hostiles int) (int, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	victim, honest := newFeedNodeTB(t, ctx), newFeedNodeTB(t, ctx)
	if a == holdAnswers {
		shareFeeds(t, 3000, victim, honest)
	}
	linkTB(t, ctx, honest, victim)
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var hs []*p2p.Host
	var opened []*atomic.Int64
	for range hostiles {
		h := newBareHost(t, ctx)
		if err := h.Connect(ctx, peer.AddrInfo{ID: victim.h.ID(), Addrs: victim.h.LibP2P().Addrs()}); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		opened = append(opened, attackSync(actx, h, victim.h.ID(), a, 2*maxServing/hostiles))
	}
	// The attack is in place once the victim holds most of the streams
	// (the resource manager lets 32 per peer through) and, against
	// answers, is busy writing some of them.
	waitFor(t, 10*time.Second, "the hostile streams", func() bool {
		used, _ := victim.f.serving.stats()
		return syncStreamsFrom(victim, hs) >= maxServing*3/4 && (a == stallRequests || used >= maxServingPerPeer)
	})
	held := syncStreamsFrom(victim, hs)
	start := time.Now()
	ok := honestHeads(ctx, honest, victim.h.ID(), 16)
	took := time.Since(start)
	used, _ := victim.f.serving.stats()
	var n int64
	for _, o := range opened {
		n += o.Load()
	}
	t.Logf("%s from %d peer(s): %d streams opened, %d held by the victim when the honest requests began, %d slots in use at the end; %d of 16 honest heads requests succeeded in %v",
		a, hostiles, n, held, used, ok, took.Round(time.Millisecond))
	return ok, took
}

// TestLedgerSyncSurvivesStalledRequests: a peer that keeps 64 streams
// open with one byte of a request each (twice the serving slots) holds
// no slot, so every honest heads request succeeds.
func TestLedgerSyncSurvivesStalledRequests(t *testing.T) {
	if ok, _ := syncUnderAttack(t, stallRequests, 1); ok != 16 {
		t.Fatalf("%d of 16 honest heads requests succeeded while a peer stalled requests", ok)
	}
}

// TestLedgerSyncSurvivesStalledRequestsFromManyPeers: the same from eight
// peers, whose per-peer shares (8 x maxServingPerPeer) together would
// cover every slot: the request is read before a slot is taken, so they
// still hold none.
func TestLedgerSyncSurvivesStalledRequestsFromManyPeers(t *testing.T) {
	if ok, _ := syncUnderAttack(t, stallRequests, 8); ok != 16 {
		t.Fatalf("%d of 16 honest heads requests succeeded while 8 peers stalled requests", ok)
	}
}

// TestLedgerSyncSurvivesAPeerNotReading: a peer that sends whole heads
// requests on 64 streams and never reads the answers holds its
// maxServingPerPeer slots and no more, so every honest heads request
// succeeds.
func TestLedgerSyncSurvivesAPeerNotReading(t *testing.T) {
	if ok, _ := syncUnderAttack(t, holdAnswers, 1); ok != 16 {
		t.Fatalf("%d of 16 honest heads requests succeeded while a peer held answers", ok)
	}
}

// BenchmarkLedgerSyncUnderAttack reports the share of 16 honest heads
// requests that succeed while hostile peers run each attack, and how long
// the 16 take (4 at a time, as reconcile allows; a refused one takes
// serveWait). ns/op includes starting the nodes.
func BenchmarkLedgerSyncUnderAttack(b *testing.B) {
	for _, c := range []struct {
		a     syncAttack
		peers int
	}{{stallRequests, 1}, {stallRequests, 8}, {holdAnswers, 1}} {
		b.Run(fmt.Sprintf("%s/peers=%d", c.a, c.peers), func(b *testing.B) {
			var ok, all int
			var took time.Duration
			for b.Loop() {
				n, d := syncUnderAttack(b, c.a, c.peers)
				ok, all, took = ok+n, all+16, took+d
			}
			b.ReportMetric(100*float64(ok)/float64(all), "honest-ok-%")
			b.ReportMetric(float64(took)/1e6/float64(all/16), "honest-16-ms")
		})
	}
}
