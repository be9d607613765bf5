package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/ipfs/go-cid"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Ledger protocols, scoped by p2p to /gleaner/N/.
const (
	ledgerTopic     = "ledger/1"
	ledgerSyncProto = "ledger-sync/1"
	maxHeadMsg      = 160 << 10 // a head, or a fraud proof of two entries
	maxSyncEntries  = 256       // entries per range request
	antiEntropy     = 30 * time.Second
)

// ledgerHead is what the ledger topic carries: an author's new head, or a
// proof that the author equivocated.
type ledgerHead struct {
	Author string `json:"author"`
	Seq    uint64 `json:"seq,omitempty"`
	CID    string `json:"cid,omitempty"`
	Proof  []byte `json:"proof,omitempty"`
}

type syncRequest struct {
	Kind   string `json:"kind"` // "range" or "heads"
	Author string `json:"author,omitempty"`
	From   uint64 `json:"from,omitempty"`
	To     uint64 `json:"to,omitempty"`
}

// feeds is this node's part in the replicated log: it appends to its own
// feed, gossips heads, fetches what it lacks by range from the peer that
// announced it, repairs gaps by anti-entropy with random peers, and turns a
// fork into a fraud proof that freezes the author everywhere.
type feeds struct {
	host  *p2p.Host
	store *ledger.Store
	key   crypto.PrivKey
	log   *slog.Logger
	topic *pubsub.Topic

	appendMu sync.Mutex // serialises appends to our own feed
	syncMu   sync.Mutex // one fetch at a time per node: bounded memory and load
}

func newFeeds(h *p2p.Host, store *ledger.Store, key crypto.PrivKey, log *slog.Logger) *feeds {
	return &feeds{host: h, store: store, key: key, log: log}
}

func (f *feeds) start(ctx context.Context) error {
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
	events, err := f.host.SubscribePeerEvents(ctx)
	if err != nil {
		return err
	}
	go f.reconcileOnConnect(ctx, events)
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
			// Identify must finish before the sync protocol is known.
			time.Sleep(200 * time.Millisecond)
			if err := f.reconcile(ctx, p); err != nil {
				f.log.Debug("reconcile on connect", "peer", p, "err", err)
			}
		}(ev.Peer)
	}
}

// validate rejects malformed heads and false proofs before they spread.
func (f *feeds) validate(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	var h ledgerHead
	if decodeMsg(m.Data, &h) != nil {
		return pubsub.ValidationReject
	}
	if _, err := peer.Decode(h.Author); err != nil {
		return pubsub.ValidationReject
	}
	if len(h.Proof) > 0 {
		if author, err := ledger.VerifyProof(h.Proof); err != nil || author != h.Author {
			return pubsub.ValidationReject
		}
		return pubsub.ValidationAccept
	}
	if _, err := cid.Decode(h.CID); err != nil || h.Seq == 0 {
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
	f.publish(ledgerHead{Author: self, Seq: e.Seq, CID: c})
	return c, nil
}

func (f *feeds) publish(h ledgerHead) {
	raw, err := json.Marshal(h)
	if err == nil {
		err = f.topic.Publish(context.Background(), raw)
	}
	if err != nil {
		f.log.Debug("ledger head not published", "err", err)
	}
}

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
		if decodeMsg(m.Data, &h) == nil {
			go f.onHead(ctx, m.ReceivedFrom, h)
		}
	}
}

// onHead brings the author's feed up to the announced head, fetching from
// the peer that forwarded it; a different entry at a sequence number we
// hold is fetched too, so that a fork is caught.
func (f *feeds) onHead(ctx context.Context, from peer.ID, h ledgerHead) {
	if len(h.Proof) > 0 {
		if _, err := f.store.Freeze(h.Proof); err != nil {
			f.log.Debug("fraud proof not applied", "err", err)
		}
		return
	}
	if _, frozen := f.store.Frozen(h.Author); frozen {
		return
	}
	ours, ok, err := f.store.Head(h.Author)
	if err != nil {
		return
	}
	lo, hi := uint64(0), uint64(0)
	switch {
	case !ok || ours.Seq < h.Seq:
		lo, hi = 1, h.Seq
		if ok {
			lo = ours.Seq + 1
		}
	default:
		have, err := f.store.Range(h.Author, h.Seq, h.Seq)
		if err == nil && len(have) == 1 && have[0].CID().String() != h.CID {
			lo, hi = h.Seq, h.Seq
		}
	}
	if lo == 0 {
		return
	}
	// The peer that forwarded a head may not have stored the entries yet
	// (gossip forwards before the receiver fetches); the author always has
	// its own, so it is asked next.
	if f.fetch(ctx, from, h.Author, lo, hi) {
		return
	}
	if author, err := peer.Decode(h.Author); err == nil && author != from && author != f.host.ID() {
		f.fetch(ctx, author, h.Author, lo, hi)
	}
}

// fetch asks peer p for author's entries from..to and appends them in
// order; true when it got them all or settled the matter (a fork found).
// An equivocation found on the way is published as a proof.
func (f *feeds) fetch(ctx context.Context, p peer.ID, author string, from, to uint64) bool {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	to = min(to, from+maxSyncEntries-1)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := f.host.LibP2P().NewStream(ctx, p, f.host.ProtocolID(ledgerSyncProto))
	if err != nil {
		return false
	}
	defer s.Close()
	dl, _ := ctx.Deadline()
	_ = s.SetDeadline(dl)
	if err := writeMsg(s, syncRequest{Kind: "range", Author: author, From: from, To: to}); err != nil {
		return false
	}
	var last *ledger.SignedEntry
	for i := from; i <= to; i++ {
		raw, err := p2p.ReadFrame(s, ledger.MaxEntryBytes+1024)
		if err != nil || len(raw) == 0 {
			return false
		}
		e, se, err := ledger.DecodeSignedEntry(raw)
		if err != nil || e.Author != author || e.Seq != i {
			return false // a peer serving junk
		}
		err = f.store.Append(se)
		if errors.Is(err, ledger.ErrEquivocation) {
			if proof, ok := f.store.Frozen(author); ok {
				f.log.Warn("equivocation: feed frozen", "author", author, "seq", e.Seq)
				f.publish(ledgerHead{Author: author, Proof: proof})
			}
			return true
		}
		if err != nil {
			return false
		}
		last = se
	}
	if last != nil {
		// Pass the news on: after a partition heals, peers further away
		// learn of heads they missed from us, not only at anti-entropy.
		f.publish(ledgerHead{Author: author, Seq: to, CID: last.CID().String()})
	}
	return true
}

// serve answers range and heads requests from the local store.
func (f *feeds) serve(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	var req syncRequest
	if err := readMsg(s, &req); err != nil {
		_ = s.Reset()
		return
	}
	switch req.Kind {
	case "heads":
		hs, err := f.store.Heads()
		if err != nil {
			return
		}
		out := make([]ledgerHead, 0, len(hs))
		for _, h := range hs {
			out = append(out, ledgerHead{Author: h.Author, Seq: h.Seq, CID: h.CID.String()})
		}
		_ = writeMsg(s, out)
	case "range":
		if req.To < req.From || req.To-req.From >= maxSyncEntries {
			return
		}
		entries, err := f.store.Range(req.Author, req.From, req.To)
		if err != nil {
			return
		}
		for _, se := range entries {
			raw, err := se.Marshal()
			if err != nil || p2p.WriteFrame(s, raw, ledger.MaxEntryBytes+1024) != nil {
				return
			}
		}
		_ = p2p.WriteFrame(s, nil, 1)
	}
}

// antiEntropyLoop compares heads with a random peer now and then and
// fetches what gossip missed, so partitions heal.
func (f *feeds) antiEntropyLoop(ctx context.Context) {
	t := time.NewTicker(antiEntropy)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
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

// reconcile fetches every feed that peer p holds further than we do.
func (f *feeds) reconcile(ctx context.Context, p peer.ID) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := f.host.LibP2P().NewStream(cctx, p, f.host.ProtocolID(ledgerSyncProto))
	if err != nil {
		return err
	}
	dl, _ := cctx.Deadline()
	_ = s.SetDeadline(dl)
	var heads []ledgerHead
	err = writeMsg(s, syncRequest{Kind: "heads"})
	if err == nil {
		err = readMsg(s, &heads)
	}
	s.Close()
	if err != nil {
		return err
	}
	for _, h := range heads {
		f.onHead(ctx, p, h)
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
