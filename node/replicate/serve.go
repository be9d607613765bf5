package replicate

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// serve answers range, head and heads requests from the local store, and takes
// "have" pushes. It reads the request before it takes a slot, under the
// short syncRequestWait, so a peer that opens streams and sends half a
// request holds no slot and is cut off soon. At most maxServing requests
// are then worked on at once, at most maxServingPerPeer of them one
// peer's; one that finds no slot within serveWait is refused (a fetcher
// retries from another source, a push's news waits for anti-entropy), so
// a flood of requests costs bounded memory and work and one peer cannot
// crowd out the others.
func (f *Feeds) serve(s network.Stream) {
	defer s.Close()
	_ = s.SetReadDeadline(time.Now().Add(syncRequestWait))
	raw, err := p2p.ReadFrame(s, maxSyncRequest)
	var req syncRequest
	if err == nil {
		err = decodeMsg(raw, &req)
	}
	if err != nil {
		_ = s.Reset()
		return
	}
	from := s.Conn().RemotePeer()
	if !f.serving.take(from, serveWait) {
		_ = s.Reset()
		return
	}
	defer f.serving.give(from)
	_ = s.SetDeadline(time.Now().Add(syncTimeout))
	switch req.Kind {
	case "heads":
		f.serveHeads(s)
	case "head": // one author's head: a restarted node asking for its own feed
		f.serveHead(s, req.Author)
	case "range":
		f.serveRanges(s, []syncRange{{Author: req.Author, From: req.From, To: req.To}})
	case "ranges":
		f.serveRanges(s, req.Ranges)
	case "have":
		if !f.takeHave(from, req) {
			_ = s.Reset()
		}
	}
}

// takeHave takes a "have" push from a peer: the author's list of the
// peers it told (its own head only), then every valid head on offer. A
// push over the bounds is refused whole (false).
func (f *Feeds) takeHave(from peer.ID, req syncRequest) bool {
	if len(req.Heads) > maxHeadsPerMsg || len(req.Told) > maxPushPeers {
		return false
	}
	// The list first, decoded once: the fetch an offer starts ends in a
	// relay, which reads it. Only the sender's own head takes it.
	if len(req.Told) > 0 {
		self := from.String()
		if i := slices.IndexFunc(req.Heads, func(h ledgerHead) bool { return h.Author == self }); i >= 0 && validHead(req.Heads[i]) {
			f.told.record(req.Heads[i].Author, req.Heads[i].Seq, parseTold(req.Told))
		}
	}
	for _, h := range req.Heads {
		if validHead(h) {
			f.offer(h, from)
		}
	}
	return true
}

// serveRanges sends, for each range asked for, the entries of it that we
// hold, then an empty frame. It reads the store serveChunk entries at a
// time, so a request costs little memory whatever the entries' size.
func (f *Feeds) serveRanges(s network.Stream, rs []syncRange) {
	if len(rs) > maxRangesPerRequest {
		return
	}
	total := uint64(0)
	for _, r := range rs {
		if r.From == 0 || r.To < r.From || r.To-r.From >= maxSyncEntries {
			return
		}
		if total += r.To - r.From + 1; total > maxEntriesPerRequest {
			return
		}
	}
	for _, r := range rs {
		for lo := r.From; lo <= r.To; lo += serveChunk {
			entries, err := f.store.Range(r.Author, lo, min(r.To, lo+serveChunk-1))
			if err != nil {
				return
			}
			for _, se := range entries {
				raw, err := se.Marshal()
				if err != nil || p2p.WriteFrame(s, raw, ledger.MaxEntryBytes+1024) != nil {
					return
				}
			}
			if len(entries) < serveChunk {
				break
			}
		}
		if p2p.WriteFrame(s, nil, 1) != nil {
			return
		}
	}
}

// serveHeads sends our heads, our own first, at most maxHeadsServed.
func (f *Feeds) serveHeads(s network.Stream) {
	hs, err := f.store.Heads()
	if err != nil {
		return
	}
	self := f.host.ID().String()
	out := make([]ledgerHead, 1, min(len(hs), maxHeadsServed)+1)
	for _, h := range hs {
		lh := ledgerHead{Author: h.Author, Seq: h.Seq, CID: h.CID.String()}
		if h.Author == self {
			out[0] = lh
		} else if len(out) <= maxHeadsServed {
			out = append(out, lh)
		}
	}
	if out[0].Author == "" {
		out = out[1:]
	}
	out = out[:min(len(out), maxHeadsServed)]
	if b, err := json.Marshal(out); err == nil {
		_ = p2p.WriteFrame(s, b, maxHeadsFrame)
	}
}

// openSync opens a sync stream to a connected peer (never dialling: sync
// rides on connections the node has anyway) with the whole exchange bound
// by timeout; done closes it.
func (f *Feeds) openSync(ctx context.Context, p peer.ID, timeout time.Duration) (network.Stream, func(), error) {
	return f.openSyncWith(ctx, p, timeout, f.host.ProtocolID(ledgerSyncProto))
}

// openSyncWith is openSync with the protocols to ask for, in order of
// preference.
func (f *Feeds) openSyncWith(ctx context.Context, p peer.ID, timeout time.Duration, protos ...protocol.ID) (network.Stream, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	s, err := f.host.LibP2P().NewStream(network.WithNoDial(ctx, "ledger sync with connected peers"), p, protos...)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	dl, _ := ctx.Deadline()
	_ = s.SetDeadline(dl)
	return s, func() { s.Close(); cancel() }, nil
}
