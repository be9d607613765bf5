package replicate

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// outbox holds the heads waiting to be pushed to one peer, one per feed.
type outbox struct {
	heads   map[string]ledgerHead
	sending bool // a drain goroutine owns the sending
	// told: the peers our own head in heads was queued for, named in
	// its push (told.go).
	told []string
}

// announce queues a head this node has just stored for the next round of
// announcements. The queue holds one head per feed; past maxHeadsServed
// feeds, news waits for anti-entropy.
func (f *Feeds) announce(h ledgerHead) {
	f.annMu.Lock()
	if old, ok := f.ann[h.Author]; ok || len(f.ann) < maxHeadsServed {
		if !ok || old.Seq < h.Seq {
			f.ann[h.Author] = h
		}
	}
	f.annMu.Unlock()
	select {
	case f.annKick <- struct{}{}:
	default:
	}
}

// announceLoop runs the rounds of announcements, at most one every
// announceEvery: the first head after a quiet spell goes out at once, a
// burst goes out in batches. A round gossips our own head and queues every
// head stored since the last round for each connected peer.
func (f *Feeds) announceLoop(ctx context.Context) {
	self := f.host.ID().String()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.annKick:
		}
		if d := announceEvery - time.Since(last); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		last = time.Now()
		f.annMu.Lock()
		batch := make([]ledgerHead, 0, len(f.ann))
		for _, h := range f.ann {
			batch = append(batch, h)
		}
		clear(f.ann)
		f.annMu.Unlock()
		for _, h := range batch {
			if h.Author == self {
				f.publish(h)
			}
		}
		f.push(ctx, batch)
	}
}

// push queues heads for connected peers (at most maxPushPeers of them); a
// sender per peer drains its queue, so one slow peer delays nobody else's
// news.
func (f *Feeds) push(ctx context.Context, heads []ledgerHead) {
	if len(heads) == 0 {
		return
	}
	peers := f.host.LibP2P().Network().Peers()
	if len(peers) > maxPushPeers {
		rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
		peers = peers[:maxPushPeers]
	}
	self := f.host.ID().String()
	ours := slices.ContainsFunc(heads, func(h ledgerHead) bool { return h.Author == self })
	// For each head of another author that came with its list, the
	// peers the relay leaves out (told.go).
	skips := make([]map[peer.ID]bool, len(heads))
	for i, h := range heads {
		if h.Author != self {
			skips[i] = f.told.skips(h.Author, h.Seq, peers)
		}
	}
	f.outMu.Lock()
	defer f.outMu.Unlock()
	var told []string // the peers our own head was queued for, directly connected
	var queued []*outbox
	for _, p := range peers {
		q := f.out[p]
		if q == nil {
			q = &outbox{heads: make(map[string]ledgerHead)}
		}
		ps := p.String()
		for i, h := range heads {
			if skips[i][p] || h.Author == ps {
				continue // the author told p itself, or is p (told.go)
			}
			if old, ok := q.heads[h.Author]; (ok && old.Seq < h.Seq) || (!ok && len(q.heads) < maxOutbox) {
				q.heads[h.Author] = h
			}
		}
		if len(q.heads) == 0 {
			continue
		}
		// Only a peer with a direct connection can fetch from us (sync
		// does not use relayed connections), so only such a peer goes on
		// the list: a hub relays to the others.
		if _, mine := q.heads[self]; ours && mine {
			if f.host.LibP2P().Network().Connectedness(p) == network.Connected {
				told = append(told, ps)
				queued = append(queued, q)
			} else {
				q.told = nil // no list of an earlier round with this head
			}
		}
		f.out[p] = q
		if !q.sending {
			q.sending = true
			f.goRun(func() { f.drain(ctx, p, q) })
		}
	}
	for _, q := range queued {
		q.told = told // read by the drains under outMu
	}
}

// drain sends p's queued heads, maxHeadsPerMsg at a time, until none are
// left, or p fails to take them: then the rest waits for anti-entropy.
func (f *Feeds) drain(ctx context.Context, p peer.ID, q *outbox) {
	for {
		f.outMu.Lock()
		batch := make([]ledgerHead, 0, min(len(q.heads), maxHeadsPerMsg))
		for a, h := range q.heads {
			if len(batch) == maxHeadsPerMsg {
				break
			}
			batch = append(batch, h)
			delete(q.heads, a)
		}
		if len(batch) == 0 {
			q.sending = false
			delete(f.out, p)
			f.outMu.Unlock()
			return
		}
		var told []string
		self := f.host.ID().String()
		if slices.ContainsFunc(batch, func(h ledgerHead) bool { return h.Author == self }) {
			told = q.told
		}
		f.outMu.Unlock()
		if err := f.pushTo(ctx, p, batch, told); err != nil {
			f.log.Debug("have not pushed", "peer", p, "err", err)
			f.outMu.Lock()
			clear(q.heads)
			f.outMu.Unlock()
		}
	}
}

func (f *Feeds) pushTo(ctx context.Context, p peer.ID, heads []ledgerHead, told []string) error {
	v2 := f.host.ProtocolID(ledgerSyncProto2)
	s, done, err := f.openSyncWith(ctx, p, pushTimeout, v2, f.host.ProtocolID(ledgerSyncProto))
	if err != nil {
		return err
	}
	defer done()
	f.pushes.Add(1)
	req := syncRequest{Kind: "have", Heads: heads}
	if s.Protocol() == v2 {
		req.Told = told
	}
	return writeMsg(s, req)
}
