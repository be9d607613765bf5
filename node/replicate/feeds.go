// Package replicate is ledger replication over libp2p streams and gossip:
// heads on the ledger topic, ranges and heads over /gleaner/N/ledger-sync/1,
// batched "have" pushes to connected peers, anti-entropy, and bounded
// fetching (bounds.go says what peers can make a node hold). It is an
// adapter over a ledger.Store and a p2p.Host; node composes it.
package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/ipfs/go-cid"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Ledger protocols, scoped by p2p to /gleaner/N/.
const (
	ledgerTopic     = "ledger/1"
	ledgerSyncProto = "ledger-sync/1"
	// ledgerSyncProto2 is ledger-sync/1 whose "have" may name the peers
	// an author told of its own head (told.go). Both are served; a push
	// asks for 2 first, so a node of before lists gets the plain form.
	ledgerSyncProto2 = "ledger-sync/2"
	maxHeadMsg       = 160 << 10 // a head, or a fraud proof of two entries
	maxSyncEntries   = 256       // entries of one feed per request
	antiEntropy      = 30 * time.Second

	fetchWorkers    = 4                     // fetch requests in flight per node
	announceEvery   = 50 * time.Millisecond // at most one round of announcements this often
	serveChunk      = 32                    // entries read from the store at a time when serving
	fetchBatchBytes = 1 << 20               // entries held by a fetch before they are stored
	syncTimeout     = 10 * time.Second      // one sync exchange
	pushTimeout     = 2 * time.Second       // one "have" push
	serveWait       = time.Second           // for a slot to answer a request in

	// maxMsgFrame is the most a sync message may take when written (what
	// node's writeMsg allowed); readers bound what they read far lower.
	maxMsgFrame = 12 << 20
)

// SyncProtocol is the ledger sync stream protocol (scoped by p2p to
// /gleaner/N/), MaxSyncRequest the most its handler reads of a request
// (for tests that attack it from outside the package), and SyncTimeout
// the most one sync exchange takes (a bound for a caller of Reconcile).
const (
	SyncProtocol   = ledgerSyncProto
	MaxSyncRequest = maxSyncRequest
	SyncTimeout    = syncTimeout
)

// ledgerHead is what the ledger topic carries: an author's new head, or a
// proof that the author equivocated. Heads responses and "have" pushes are
// lists of heads.
type ledgerHead struct {
	Author string `json:"author"`
	Seq    uint64 `json:"seq,omitempty"`
	CID    string `json:"cid,omitempty"`
	Proof  []byte `json:"proof,omitempty"`
}

type syncRequest struct {
	Kind   string       `json:"kind"` // "range", "ranges", "head", "heads" or "have"
	Author string       `json:"author,omitempty"`
	From   uint64       `json:"from,omitempty"`
	To     uint64       `json:"to,omitempty"`
	Ranges []syncRange  `json:"ranges,omitempty"` // "ranges": several feeds' at once
	Heads  []ledgerHead `json:"heads,omitempty"`  // "have": heads the sender now holds
	// Told, in a "have" over ledger-sync/2, names the peers the sender
	// queued its own head in Heads for (told.go); at most maxPushPeers.
	Told []string `json:"told,omitempty"`
}

// syncRange asks for author's entries from..to.
type syncRange struct {
	Author string `json:"author"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
}

// Feeds is this node's part in the replicated log: it appends to its own
// feed and gossips its head; tells its connected peers which heads it has
// newly stored ("have", batched), so news crosses any topology hop by hop;
// fetches what it lacks by range from a connected peer that holds it;
// compares all heads with every new peer and now and then with a random
// one (anti-entropy); and turns a fork into a fraud proof that freezes the
// author everywhere. What peers can make it hold is bounded (bounds.go).
type Feeds struct {
	host  *p2p.Host
	store *ledger.Store
	key   crypto.PrivKey
	log   *slog.Logger
	topic *pubsub.Topic

	appendMu sync.Mutex // serialises appends to our own feed
	// Counterparty tells the peers this node deals with (see dealsWith):
	// their new feeds are fetched past the foreign feed cap. The node sets
	// it once the market and jobs are up; nil: none.
	Counterparty atomic.Pointer[func(author string) bool]
	wants        *wantList // feeds to fetch
	serving      *servingSlots
	recons       chan struct{}

	annMu   sync.Mutex            // guards ann
	ann     map[string]ledgerHead // heads stored since the last announcement round
	annKick chan struct{}

	outMu sync.Mutex // guards out and every outbox in it
	out   map[peer.ID]*outbox
	told  *toldList // the peers authors told of their heads (told.go)

	// pushes counts "have" pushes sent, for the tests.
	pushes atomic.Int64

	// Recovery bounds the recovery of this node's own feed from peers at
	// start (recover.go); set it before Start.
	Recovery  RecoverOptions
	ready     chan struct{}   // closed when appends may go ahead (recover.go)
	recovered chan struct{}   // closed once the recovery at start is over
	quit      <-chan struct{} // closed when replication stops: a waiting append gives up

	cancel context.CancelFunc // ends what Start started
	wg     sync.WaitGroup     // the goroutines Start started, and theirs
}

// New returns the replication of store's feeds over h; key signs this
// node's own entries. Nothing runs until Start.
func New(h *p2p.Host, store *ledger.Store, key crypto.PrivKey, log *slog.Logger) *Feeds {
	return &Feeds{
		host: h, store: store, key: key, log: log,
		wants:     newWantList(),
		serving:   newServingSlots(),
		recons:    make(chan struct{}, maxReconciles),
		ann:       make(map[string]ledgerHead),
		annKick:   make(chan struct{}, 1),
		out:       make(map[peer.ID]*outbox),
		told:      newToldList(),
		ready:     make(chan struct{}),
		recovered: make(chan struct{}),
	}
}

// Start joins the ledger topic, serves the sync protocol and starts the
// loops (gossip, anti-entropy, announcements, fetch workers, reconcile on
// connect), which run until ctx ends or Stop.
func (f *Feeds) Start(ctx context.Context) error {
	ctx, f.cancel = context.WithCancel(ctx)
	f.quit = ctx.Done()
	if err := f.countHeld(); err != nil {
		return err
	}
	// Appends wait for the recovery only where the own feed is empty and
	// may be held elsewhere; a node that holds its feed catches up on what
	// peers hold beyond it without holding appends up.
	_, held, err := f.store.Head(f.host.ID().String())
	if err != nil {
		return err
	}
	awaited := f.Recovery.Await && !held
	if !awaited {
		close(f.ready)
	}
	t, err := f.host.Join(ledgerTopic, f.validate, maxHeadMsg)
	if err != nil {
		return err
	}
	f.topic = t
	sub, err := t.Subscribe()
	if err != nil {
		return err
	}
	f.host.LibP2P().SetStreamHandler(f.host.ProtocolID(ledgerSyncProto), f.serve)
	f.host.LibP2P().SetStreamHandler(f.host.ProtocolID(ledgerSyncProto2), f.serve)
	f.goRun(func() { f.readLoop(ctx, sub) })
	f.goRun(func() { f.antiEntropyLoop(ctx) })
	f.goRun(func() { f.announceLoop(ctx) })
	for range fetchWorkers {
		f.goRun(func() { f.fetchLoop(ctx) })
	}
	events, err := f.host.SubscribePeerEvents(ctx)
	if err != nil {
		return err
	}
	f.goRun(func() { f.reconcileOnConnect(ctx, events) })
	f.goRun(func() { f.recoverOwn(ctx, awaited) })
	return nil
}

// goRun runs fn on a goroutine Stop waits for. It is called by Start and
// by those goroutines only, so that the wait group never counts up from
// zero while Stop waits.
func (f *Feeds) goRun(fn func()) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
}

// Stop ends what Start started and waits for its goroutines until ctx
// ends. Streams that peers opened are the host's to close.
func (f *Feeds) Stop(ctx context.Context) error {
	if f == nil || f.cancel == nil {
		return nil
	}
	f.cancel()
	done := make(chan struct{})
	go func() {
		f.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ledger replication still running: %w", ctx.Err())
	}
}

// countHeld counts the foreign feeds already stored, for maxForeignFeeds.
func (f *Feeds) countHeld() error {
	hs, err := f.store.Heads()
	if err != nil {
		return err
	}
	self := f.host.ID().String()
	for _, h := range hs {
		if h.Author != self {
			f.wants.stored(h.Author)
		}
	}
	return nil
}

// reconcileOnConnect compares heads with every newly connected peer: a
// healed partition converges in the time of one exchange, not at the next
// anti-entropy round.
func (f *Feeds) reconcileOnConnect(ctx context.Context, events <-chan p2p.PeerEvent) {
	for ev := range events {
		if ev.Type != "connected" {
			continue
		}
		p := ev.Peer
		f.goRun(func() {
			// NewStream waits for identify, so the sync protocol is known.
			if err := f.Reconcile(ctx, p); err != nil {
				f.log.Debug("reconcile on connect", "peer", p, "err", err)
			}
		})
	}
}

// validHead says whether h is a well-formed head: a canonical peer ID, a
// CID, a sequence number. Everything a peer announces passes it before
// anything else looks at it.
func validHead(h ledgerHead) bool {
	id, err := peer.Decode(h.Author)
	if err != nil || id.String() != h.Author || h.Seq == 0 || len(h.Proof) > 0 {
		return false
	}
	_, err = cid.Decode(h.CID)
	return err == nil
}

// validate rejects malformed heads and false proofs before they spread.
func (f *Feeds) validate(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	var h ledgerHead
	if decodeMsg(m.Data, &h) != nil {
		return pubsub.ValidationReject
	}
	if len(h.Proof) > 0 {
		if _, err := peer.Decode(h.Author); err != nil {
			return pubsub.ValidationReject
		}
		if author, err := ledger.VerifyProof(h.Proof); err != nil || author != h.Author {
			return pubsub.ValidationReject
		}
		return pubsub.ValidationAccept
	}
	if !validHead(h) {
		return pubsub.ValidationReject
	}
	return pubsub.ValidationAccept
}

// Append adds an entry to this node's own feed and announces the new head.
func (f *Feeds) Append(typ string, payload []byte) (string, error) {
	cids, err := f.AppendAll(typ, [][]byte{payload})
	if err != nil {
		return "", err
	}
	return cids[0], nil
}

// AppendAll adds one entry of type typ per payload to this node's own
// feed, in order, in one store transaction (one fsync for them all: a
// provider's group commit of concurrent awards, issue 33), and announces
// the last head. An entry the store refuses is returned as the error;
// those before it are stored, none after it.
func (f *Feeds) AppendAll(typ string, payloads [][]byte) ([]string, error) {
	if err := f.awaitRecovery(); err != nil {
		return nil, err
	}
	if len(payloads) == 0 {
		return nil, nil
	}
	f.appendMu.Lock()
	defer f.appendMu.Unlock()
	self := f.host.ID().String()
	var prev *ledger.Entry
	if h, ok, err := f.store.Head(self); err != nil {
		return nil, err
	} else if ok {
		if prev, _, err = f.store.Get(h.CID); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	ses := make([]*ledger.SignedEntry, 0, len(payloads))
	for _, payload := range payloads {
		e, se, err := ledger.NewEntry(f.key, prev, typ, payload, now)
		if err != nil {
			return nil, err
		}
		prev = e
		ses = append(ses, se)
	}
	errs, err := f.store.AppendBatch(ses)
	if err != nil {
		return nil, err
	}
	cids := make([]string, len(ses))
	for i, se := range ses {
		if errs[i] != nil {
			return nil, errs[i]
		}
		cids[i] = se.CID().String()
	}
	f.announce(ledgerHead{Author: self, Seq: prev.Seq, CID: cids[len(cids)-1]})
	return cids, nil
}

// publish gossips a head or a proof on the ledger topic.
func (f *Feeds) publish(h ledgerHead) {
	raw, err := json.Marshal(h)
	if err == nil {
		err = f.topic.Publish(context.Background(), raw)
	}
	if err != nil {
		f.log.Debug("ledger head not published", "err", err)
	}
}

// readLoop takes gossiped heads and proofs. It does no network I/O, so a
// flood of messages costs store reads, never a goroutine each.
func (f *Feeds) readLoop(ctx context.Context, sub *pubsub.Subscription) {
	defer sub.Cancel()
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return
		}
		if m.ReceivedFrom == f.host.ID() {
			continue
		}
		var h ledgerHead
		if decodeMsg(m.Data, &h) != nil {
			continue
		}
		if len(h.Proof) > 0 {
			if _, err := f.store.Freeze(h.Proof); err != nil {
				f.log.Debug("fraud proof not applied", "err", err)
			}
			continue
		}
		// Only the publisher is known to hold the entries (a forwarder
		// passes a head on before it has fetched them); if it is not
		// connected to us, a neighbour's "have" brings the news once the
		// neighbour holds them.
		if from := m.GetFrom(); f.connected(from) {
			f.offer(h, from)
		}
	}
}

// antiEntropyLoop compares heads with a random peer now and then and
// fetches what gossip missed, so partitions heal; it also sweeps the wait
// list.
func (f *Feeds) antiEntropyLoop(ctx context.Context) {
	t := time.NewTicker(antiEntropy)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.wants.sweep(time.Now())
			f.reconcileWithRandomPeer(ctx)
		}
	}
}

func (f *Feeds) reconcileWithRandomPeer(ctx context.Context) {
	peers := f.host.LibP2P().Network().Peers()
	if len(peers) == 0 {
		return
	}
	p := peers[rand.IntN(len(peers))]
	if err := f.Reconcile(ctx, p); err != nil {
		f.log.Debug("anti-entropy", "peer", p, "err", err)
	}
}

// Reconcile asks connected peer p for all its heads and puts every feed it
// holds further than we do on the wait list; the fetch workers do the rest.
func (f *Feeds) Reconcile(ctx context.Context, p peer.ID) error {
	select {
	case f.recons <- struct{}{}:
		defer func() { <-f.recons }()
	case <-ctx.Done():
		return ctx.Err()
	}
	s, done, err := f.openSync(ctx, p, syncTimeout)
	if err != nil {
		return err
	}
	defer done()
	if err := writeMsg(s, syncRequest{Kind: "heads"}); err != nil {
		return err
	}
	raw, err := p2p.ReadFrame(s, maxHeadsFrame)
	if err != nil {
		return err
	}
	var heads []ledgerHead
	if err := decodeMsg(raw, &heads); err != nil {
		return err
	}
	if len(heads) > maxHeadsServed {
		return errors.New("ledger sync: too many heads")
	}
	for _, h := range heads {
		if validHead(h) {
			f.offer(h, p)
		}
	}
	return nil
}

// Record appends to our feed and logs, rather than fails, when it cannot:
// the market must not stop because the journal did.
func (f *Feeds) Record(typ string, payload []byte) {
	if f == nil {
		return
	}
	if _, err := f.Append(typ, payload); err != nil {
		f.log.Warn("ledger entry not recorded", "type", typ, "err", err)
	}
}

// RecordAll is Record for several entries of one type, in one
// transaction (AppendAll).
func (f *Feeds) RecordAll(typ string, payloads [][]byte) {
	if f == nil {
		return
	}
	if _, err := f.AppendAll(typ, payloads); err != nil {
		f.log.Warn("ledger entries not recorded", "type", typ, "n", len(payloads), "err", err)
	}
}

// writeMsg, readMsg and decodeMsg frame the sync protocol's JSON messages
// (p2p.WriteJSON: strict decoding, sizes checked before anything is read).
func writeMsg(w io.Writer, v any) error { return p2p.WriteJSON(w, v, maxMsgFrame) }

func readMsg(r io.Reader, limit int, v any) error { return p2p.ReadJSON(r, limit, v) }

func decodeMsg(b []byte, v any) error { return p2p.DecodeJSON(b, v) }
