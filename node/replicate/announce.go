package replicate

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// outbox holds the heads waiting to be pushed to one peer, one per feed.
type outbox struct {
	heads   map[string]ledgerHead
	sending bool // a drain goroutine owns the sending
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
	f.outMu.Lock()
	defer f.outMu.Unlock()
	for _, p := range peers {
		q := f.out[p]
		if q == nil {
			q = &outbox{heads: make(map[string]ledgerHead)}
			f.out[p] = q
		}
		for _, h := range heads {
			if old, ok := q.heads[h.Author]; (ok && old.Seq < h.Seq) || (!ok && len(q.heads) < maxOutbox) {
				q.heads[h.Author] = h
			}
		}
		if !q.sending {
			q.sending = true
			f.goRun(func() { f.drain(ctx, p, q) })
		}
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
		f.outMu.Unlock()
		if err := f.pushTo(ctx, p, batch); err != nil {
			f.log.Debug("have not pushed", "peer", p, "err", err)
			f.outMu.Lock()
			clear(q.heads)
			f.outMu.Unlock()
		}
	}
}

func (f *Feeds) pushTo(ctx context.Context, p peer.ID, heads []ledgerHead) error {
	s, done, err := f.openSync(ctx, p, pushTimeout)
	if err != nil {
		return err
	}
	defer done()
	return writeMsg(s, syncRequest{Kind: "have", Heads: heads})
}
