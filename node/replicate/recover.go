package replicate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Own-feed recovery. A node that lost its ledger.db still has its key, and
// its peers still hold its feed: were it to start its feed again at
// sequence 1, the new entries would fork its own chain and read as
// equivocation. So at start a node asks its peers for its own head and
// fetches its own entries back (signed with its key, so the store verifies
// them like any feed) before it appends; Recovery.Await makes appends wait
// for that.
//
// Defaults (RecoverOptions' zero fields).
const (
	recoverWait   = 30 * time.Second // after the first peer connects
	recoverAlone  = time.Minute      // when no peer connects at all
	recoverSettle = 2 * time.Second  // every connected peer answered, none new this long
	recoverQuorum = 3                // peers that answered: enough to stop asking
	recoverTick   = 100 * time.Millisecond
)

// errStopping is what an append waiting for recovery gets when the node
// stops first.
var errStopping = errors.New("ledger replication stopped before this node's own feed was recovered from peers")

// RecoverOptions bound the recovery of this node's own feed at start.
// Asking ends when Quorum peers have answered, or when every connected
// peer has answered and no new one connected for Settle, or Wait after the
// first peer connected, or Alone after start if none ever did; then the
// longest valid chain the peers hold is fetched.
type RecoverOptions struct {
	// Await makes appends wait for the recovery when this node's own feed
	// is empty at start. The node sets it unless its repo is brand new (a
	// new identity has no feed anywhere); a node that holds its own feed
	// still catches up on what peers hold beyond it, without waiting.
	Await  bool
	Wait   time.Duration
	Alone  time.Duration
	Settle time.Duration
	Quorum int
}

func (o RecoverOptions) withDefaults() RecoverOptions {
	if o.Wait <= 0 {
		o.Wait = recoverWait
	}
	if o.Alone <= 0 {
		o.Alone = recoverAlone
	}
	if o.Settle <= 0 {
		o.Settle = recoverSettle
	}
	if o.Quorum <= 0 {
		o.Quorum = recoverQuorum
	}
	return o
}

// ownAnswer is one peer's answer to "what do you hold of my feed?".
type ownAnswer struct {
	peer peer.ID
	head ledgerHead // zero Seq: the peer holds nothing of it
	err  error
}

// OwnFeedRecovered is closed once the recovery of this node's own feed at
// start is over: recovered from peers, found held by none, or given up.
func (f *Feeds) OwnFeedRecovered() <-chan struct{} { return f.recovered }

// awaitRecovery holds an append until the recovery is over. An append
// after it never waits; one during it gives up when replication stops
// (the order matters: once both are over, the append goes ahead).
func (f *Feeds) awaitRecovery() error {
	select {
	case <-f.ready:
		return nil
	default:
	}
	select {
	case <-f.ready:
		return nil
	case <-f.quit:
		return errStopping
	}
}

// recoverOwn asks peers for this node's own head, then fetches the longest
// chain they hold, and opens the gate on appends.
func (f *Feeds) recoverOwn(ctx context.Context, awaited bool) {
	defer close(f.recovered)
	o := f.Recovery.withDefaults()
	answers, whole := f.askOwnHeads(ctx, o)
	if !whole {
		// Stopping (or the host closed) mid-way: the gate stays shut, so
		// what the journal drains at stop is refused, not appended as a
		// second seq 1.
		return
	}
	if !awaited {
		// Appends do not wait: keep them out while we fetch, so that a
		// recovered entry and a new one never race for the same sequence.
		f.appendMu.Lock()
		defer f.appendMu.Unlock()
	}
	self := f.host.ID().String()
	before, _, _ := f.store.Head(self)
	f.fetchOwn(ctx, answers)
	if ctx.Err() != nil {
		return
	}
	if awaited {
		defer close(f.ready)
	}
	after, _, err := f.store.Head(self)
	if err != nil {
		f.log.Warn("this node's own ledger feed: head not readable after recovery", "err", err)
		return
	}
	f.reportForks(answers, after)
	switch {
	case after.Seq > before.Seq:
		f.log.Info(fmt.Sprintf("recovered this node's own ledger feed from peers: %d entries", after.Seq-before.Seq),
			"head", after.Seq, "peers_answered", len(answers))
	case awaited && len(answers) == 0:
		f.log.Warn("no peer answered for this node's own ledger feed in time: starting it afresh; should a peer hold its old feed, the new entries will read as a fork")
	case awaited && after.Seq == 0:
		f.log.Info("no peer holds this node's own ledger feed: starting it afresh", "peers_answered", len(answers))
	}
}

// askOwnHeads asks every connected peer, and every peer that connects
// meanwhile, for this node's own head, until the bounds in o say enough;
// whole is false when it was cut short by a stop.
func (f *Feeds) askOwnHeads(ctx context.Context, o RecoverOptions) (got []ownAnswer, whole bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the subscription and the questions still open
	events, err := f.host.SubscribePeerEvents(ctx)
	if err != nil {
		return nil, false
	}
	start := time.Now()
	var firstConn, lastNew time.Time
	asked := make(map[peer.ID]bool)
	replies := make(chan ownAnswer)
	open := 0
	ask := func(p peer.ID) {
		if asked[p] || !f.connected(p) {
			return
		}
		asked[p], open, lastNew = true, open+1, time.Now()
		if firstConn.IsZero() {
			firstConn = lastNew
		}
		f.goRun(func() {
			a := f.askOwnHead(ctx, p)
			select {
			case replies <- a:
			case <-ctx.Done():
			}
		})
	}
	// Subscribed first, listed second: no peer connects unseen between.
	for _, p := range f.host.LibP2P().Network().Peers() {
		ask(p)
	}
	tick := time.NewTicker(recoverTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return got, false
		case ev, ok := <-events:
			if !ok {
				return got, false
			}
			if ev.Type == "connected" {
				ask(ev.Peer)
			}
		case a := <-replies:
			open--
			if a.err != nil {
				f.log.Debug("own feed head not answered", "peer", a.peer, "err", a.err)
			} else {
				got = append(got, a)
			}
		case <-tick.C:
		}
		now := time.Now()
		switch {
		case len(got) >= o.Quorum,
			len(got) > 0 && open == 0 && now.Sub(lastNew) >= o.Settle,
			!firstConn.IsZero() && now.Sub(firstConn) >= o.Wait,
			firstConn.IsZero() && now.Sub(start) >= o.Alone:
			return got, true
		}
	}
}

// askOwnHead asks connected peer p for the head it holds of this node's
// own feed.
func (f *Feeds) askOwnHead(ctx context.Context, p peer.ID) ownAnswer {
	a := ownAnswer{peer: p}
	s, done, err := f.openSync(ctx, p, syncTimeout)
	if err != nil {
		a.err = err
		return a
	}
	defer done()
	// The asking may end (enough answers, or Wait) while this peer is
	// silent: reset the stream then, so that the read below ends with it
	// and not at the stream's deadline, holding Stop up meanwhile.
	defer context.AfterFunc(ctx, func() { _ = s.Reset() })()
	self := f.host.ID().String()
	if a.err = writeMsg(s, syncRequest{Kind: "head", Author: self}); a.err != nil {
		return a
	}
	raw, err := p2p.ReadFrame(s, maxHeadsFrame)
	if err != nil {
		a.err = err
		return a
	}
	var hs []ledgerHead
	if a.err = decodeMsg(raw, &hs); a.err != nil {
		return a
	}
	switch {
	case len(hs) == 0:
	case len(hs) == 1 && hs[0].Author == self && validHead(hs[0]):
		a.head = hs[0]
	default:
		a.err = errors.New("ledger sync: peer answered a head not asked for")
	}
	return a
}

// fetchOwn fetches this node's own feed from the peers that hold more of
// it than we do, the longest first: if peers hold two branches (a fork
// exists already), the longest valid chain is kept. A source that fails
// or serves another branch gives way to the next.
func (f *Feeds) fetchOwn(ctx context.Context, answers []ownAnswer) {
	self := f.host.ID().String()
	holders := slices.Clone(answers)
	slices.SortFunc(holders, func(a, b ownAnswer) int { return cmp.Compare(b.head.Seq, a.head.Seq) })
	for _, a := range holders {
		ours, _, err := f.store.Head(self)
		if err != nil || a.head.Seq <= ours.Seq {
			return // sorted: nobody further holds more
		}
		for ours.Seq < a.head.Seq && ctx.Err() == nil {
			r := &fetchRange{have: ours.Seq}
			r.Author, r.From, r.To = self, ours.Seq+1, min(a.head.Seq, ours.Seq+maxSyncEntries)
			err := f.fetch(ctx, a.peer, []*fetchRange{r})
			if r.stored == 0 {
				f.log.Warn("this node's own ledger feed not recovered from a peer", "peer", a.peer, "at_seq", r.From, "err", errors.Join(err, r.err))
				break
			}
			ours.Seq += uint64(r.stored)
		}
	}
}

// reportForks logs peers whose head of our own feed is not on the chain we
// kept: a fork made before this start (by an earlier fresh start, say).
func (f *Feeds) reportForks(answers []ownAnswer, kept ledger.Head) {
	self := f.host.ID().String()
	for _, a := range answers {
		if a.head.Seq == 0 {
			continue
		}
		on := false
		if a.head.Seq <= kept.Seq {
			if es, err := f.store.Range(self, a.head.Seq, a.head.Seq); err == nil && len(es) == 1 {
				on = es[0].CID().String() == a.head.CID
			}
		}
		if !on {
			f.log.Warn("a peer holds another branch of this node's own ledger feed (a fork made earlier); kept the longest valid chain",
				"peer", a.peer, "peer_head", a.head.Seq, "kept_head", kept.Seq)
		}
	}
}

// serveHead answers "head": what we hold of author's feed, as a list of
// zero or one heads.
func (f *Feeds) serveHead(w io.Writer, author string) {
	out := []ledgerHead{}
	if id, err := peer.Decode(author); err == nil && id.String() == author {
		if h, ok, err := f.store.Head(author); err == nil && ok {
			out = append(out, ledgerHead{Author: author, Seq: h.Seq, CID: h.CID.String()})
		}
	}
	if b, err := json.Marshal(out); err == nil {
		_ = p2p.WriteFrame(w, b, maxHeadsFrame)
	}
}
