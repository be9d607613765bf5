package node

import (
	"context"
	"encoding/json"
	"errors"
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
	maxHeadMsg      = 160 << 10 // a head, or a fraud proof of two entries
	maxSyncEntries  = 256       // entries of one feed per request
	antiEntropy     = 30 * time.Second

	fetchWorkers    = 4                     // fetch requests in flight per node
	announceEvery   = 50 * time.Millisecond // at most one round of announcements this often
	serveChunk      = 32                    // entries read from the store at a time when serving
	fetchBatchBytes = 1 << 20               // entries held by a fetch before they are stored
	syncTimeout     = 10 * time.Second      // one sync exchange
	pushTimeout     = 2 * time.Second       // one "have" push
	serveWait       = time.Second           // for a slot to answer a request in
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
	Kind   string       `json:"kind"` // "range", "ranges", "heads" or "have"
	Author string       `json:"author,omitempty"`
	From   uint64       `json:"from,omitempty"`
	To     uint64       `json:"to,omitempty"`
	Ranges []syncRange  `json:"ranges,omitempty"` // "ranges": several feeds' at once
	Heads  []ledgerHead `json:"heads,omitempty"`  // "have": heads the sender now holds
}

// syncRange asks for author's entries from..to.
type syncRange struct {
	Author string `json:"author"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
}

// feeds is this node's part in the replicated log: it appends to its own
// feed and gossips its head; tells its connected peers which heads it has
// newly stored ("have", batched), so news crosses any topology hop by hop;
// fetches what it lacks by range from a connected peer that holds it;
// compares all heads with every new peer and now and then with a random
// one (anti-entropy); and turns a fork into a fraud proof that freezes the
// author everywhere. What peers can make it hold is bounded (feeds_bounds.go).
type feeds struct {
	host  *p2p.Host
	store *ledger.Store
	key   crypto.PrivKey
	log   *slog.Logger
	topic *pubsub.Topic

	appendMu sync.Mutex // serialises appends to our own feed
	// counterparty tells the peers this node deals with (see dealsWith);
	// set once the market and jobs are up.
	counterparty atomic.Pointer[func(author string) bool]
	wants        *wantList // feeds to fetch
	serving      *servingSlots
	recons       chan struct{}

	annMu   sync.Mutex            // guards ann
	ann     map[string]ledgerHead // heads stored since the last announcement round
	annKick chan struct{}

	outMu sync.Mutex // guards out and every outbox in it
	out   map[peer.ID]*outbox
}

func newFeeds(h *p2p.Host, store *ledger.Store, key crypto.PrivKey, log *slog.Logger) *feeds {
	return &feeds{
		host: h, store: store, key: key, log: log,
		wants:   newWantList(),
		serving: newServingSlots(),
		recons:  make(chan struct{}, maxReconciles),
		ann:     make(map[string]ledgerHead),
		annKick: make(chan struct{}, 1),
		out:     make(map[peer.ID]*outbox),
	}
}

func (f *feeds) start(ctx context.Context) error {
	if err := f.countHeld(); err != nil {
		return err
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
	go f.readLoop(ctx, sub)
	go f.antiEntropyLoop(ctx)
	go f.announceLoop(ctx)
	for range fetchWorkers {
		go f.fetchLoop(ctx)
	}
	events, err := f.host.SubscribePeerEvents(ctx)
	if err != nil {
		return err
	}
	go f.reconcileOnConnect(ctx, events)
	return nil
}

// countHeld counts the foreign feeds already stored, for maxForeignFeeds.
func (f *feeds) countHeld() error {
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
func (f *feeds) reconcileOnConnect(ctx context.Context, events <-chan p2p.PeerEvent) {
	for ev := range events {
		if ev.Type != "connected" {
			continue
		}
		go func(p peer.ID) {
			// NewStream waits for identify, so the sync protocol is known.
			if err := f.reconcile(ctx, p); err != nil {
				f.log.Debug("reconcile on connect", "peer", p, "err", err)
			}
		}(ev.Peer)
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
func (f *feeds) validate(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
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

// append adds an entry to this node's own feed and announces the new head.
func (f *feeds) append(typ string, payload []byte) (string, error) {
	f.appendMu.Lock()
	defer f.appendMu.Unlock()
	self := f.host.ID().String()
	var prev *ledger.Entry
	if h, ok, err := f.store.Head(self); err != nil {
		return "", err
	} else if ok {
		if prev, _, err = f.store.Get(h.CID); err != nil {
			return "", err
		}
	}
	e, se, err := ledger.NewEntry(f.key, prev, typ, payload, time.Now())
	if err != nil {
		return "", err
	}
	if err := f.store.Append(se); err != nil {
		return "", err
	}
	c := se.CID().String()
	f.announce(ledgerHead{Author: self, Seq: e.Seq, CID: c})
	return c, nil
}

// publish gossips a head or a proof on the ledger topic.
func (f *feeds) publish(h ledgerHead) {
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
func (f *feeds) readLoop(ctx context.Context, sub *pubsub.Subscription) {
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
func (f *feeds) antiEntropyLoop(ctx context.Context) {
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

func (f *feeds) reconcileWithRandomPeer(ctx context.Context) {
	peers := f.host.LibP2P().Network().Peers()
	if len(peers) == 0 {
		return
	}
	p := peers[rand.IntN(len(peers))]
	if err := f.reconcile(ctx, p); err != nil {
		f.log.Debug("anti-entropy", "peer", p, "err", err)
	}
}

// reconcile asks connected peer p for all its heads and puts every feed it
// holds further than we do on the wait list; the fetch workers do the rest.
func (f *feeds) reconcile(ctx context.Context, p peer.ID) error {
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

// record appends to our feed and logs, rather than fails, when it cannot:
// the market must not stop because the journal did.
func (f *feeds) record(typ string, payload []byte) {
	if f == nil {
		return
	}
	if _, err := f.append(typ, payload); err != nil {
		f.log.Warn("ledger entry not recorded", "type", typ, "err", err)
	}
}
