package replicate

import (
	"context"
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/attest/canon"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

func (f *Feeds) connected(p peer.ID) bool {
	return p != "" && p != f.host.ID() && f.host.LibP2P().Network().Connectedness(p) == network.Connected
}

// offer puts author's feed on the wait list if src, a connected peer,
// holds more of it than we do, or another entry at a seq we hold (a fork).
func (f *Feeds) offer(h ledgerHead, src peer.ID) string {
	if h.Author == f.host.ID().String() {
		return refuseNone
	}
	if _, frozen := f.store.Frozen(h.Author); frozen {
		return refuseNone
	}
	ours, ok, err := f.store.Head(h.Author)
	if err != nil {
		return refuseNone
	}
	var check uint64
	switch {
	case !ok || ours.Seq < h.Seq:
	case ours.Seq == h.Seq:
		if ours.CID.String() == h.CID {
			return refuseNone
		}
		check = h.Seq
	default:
		have, err := f.store.Range(h.Author, h.Seq, h.Seq)
		if err != nil || len(have) != 1 || have[0].CID().String() == h.CID {
			return refuseNone
		}
		check = h.Seq
	}
	// Whom we deal with only matters for a feed we do not hold yet.
	return f.wants.offer(h.Author, h.Seq, check, src, !ok, !ok && f.dealsWith(h.Author), time.Now())
}

// dealsWith reports whether this node deals with author or is considering
// it (DESIGN: those feeds are replicated in full, past the cap on foreign
// feeds): a provider in its book, a party to one of its leases. Merely
// being connected is not enough: anyone can connect.
func (f *Feeds) dealsWith(author string) bool {
	if fn := f.Counterparty.Load(); fn != nil {
		return (*fn)(author)
	}
	return false
}

// Follow fetches author's feed whatever the foreign feed cap: the hook for
// looking at a peer this node never dealt with.
func (f *Feeds) Follow(author string) bool { return f.wants.follow(author) }

// fetchLoop is one fetch worker: it takes up to maxRangesPerRequest feeds
// off the wait list and brings each a step (at most maxSyncEntries) closer
// to its announced head, asking one request of each source: after a
// partition heals, a node fetches the dozens of feeds it missed from a
// neighbour in one exchange and one transaction.
func (f *Feeds) fetchLoop(ctx context.Context) {
	for {
		ts, ok := f.wants.next(ctx, maxRangesPerRequest)
		if !ok {
			return
		}
		f.work(ctx, ts)
	}
}

// fetchRange is one feed's part of a fetch, and how it went.
type fetchRange struct {
	syncRange
	have    uint64    // our head when the fetch was planned
	checked uint64    // the fork check this range is (0: none)
	gone    []peer.ID // sources found disconnected
	stored  int
	err     error // the first entry the store refused
}

func (f *Feeds) work(ctx context.Context, ts []wantTask) {
	bySource := make(map[peer.ID][]*fetchRange)
	var best peer.ID
	for _, t := range ts {
		r, src, gone := f.plan(t)
		switch {
		case r == nil:
		case src == "":
			f.wants.settle(t.author, r.have, 0, "", gone)
		default:
			r.gone = gone
			bySource[src] = append(bySource[src], r)
			if best == "" {
				best = src
			}
		}
	}
	// One request per worker round, to the source of the feed that waited
	// longest (so no feed starves behind a peer announcing many), for
	// every feed that source can serve; the other feeds go back to the
	// head of the queue for another worker, so that one slow peer holds
	// up only what it was asked for.
	rs, rest := fitRequest(bySource[best])
	for src, others := range bySource {
		if src != best {
			rest = append(rest, others...)
		}
	}
	for _, r := range rest {
		f.wants.release(r.Author)
	}
	if len(rs) == 0 {
		return
	}
	err := f.fetch(ctx, best, rs)
	for _, r := range rs {
		var failed peer.ID
		switch {
		case errors.Is(r.err, ledger.ErrEquivocation):
			f.wants.drop(r.Author)
			continue
		case errors.Is(r.err, ledger.ErrOutOfOrder) && r.stored == 0 && r.checked == 0 && r.have > 0:
			// The source's next entry does not follow our head: it holds
			// another branch, so look for the fork at our head (and count
			// a failure, should the source have no fork to show).
			f.wants.offer(r.Author, 0, r.have, best, false, true, time.Now())
			failed = best
		case r.err != nil || (err != nil && r.stored == 0) || (r.stored == 0 && r.checked == 0):
			failed = best
		}
		now, _, _ := f.store.Head(r.Author)
		f.wants.settle(r.Author, now.Seq, r.checked, failed, r.gone)
	}
}

// fitRequest keeps the ranges that fit in one request, maxEntriesPerRequest
// entries in all (the last one kept may be cut short); rest are the ranges
// that do not fit.
func fitRequest(rs []*fetchRange) (keep, rest []*fetchRange) {
	left := uint64(maxEntriesPerRequest)
	for i, r := range rs {
		if left == 0 {
			return rs[:i], rs[i:]
		}
		r.To = min(r.To, r.From+left-1)
		left -= r.To - r.From + 1
	}
	return rs, nil
}

// plan decides what to ask for of t's feed and from whom: the connected
// source that holds most. A nil range means the want is settled already;
// gone lists sources no longer connected.
func (f *Feeds) plan(t wantTask) (r *fetchRange, src peer.ID, gone []peer.ID) {
	if _, frozen := f.store.Frozen(t.author); frozen {
		f.wants.drop(t.author)
		return nil, "", nil
	}
	ours, _, err := f.store.Head(t.author)
	if err != nil {
		f.wants.drop(t.author)
		return nil, "", nil
	}
	r = &fetchRange{have: ours.Seq}
	r.Author = t.author
	r.From, r.To = ours.Seq+1, min(t.seq, ours.Seq+maxSyncEntries)
	if t.check > 0 && t.check <= ours.Seq {
		r.From, r.To, r.checked = t.check, t.check, t.check
	}
	if r.From > r.To {
		f.wants.settle(t.author, ours.Seq, 0, "", nil)
		return nil, "", nil
	}
	for p, seq := range t.sources {
		switch {
		case !f.connected(p):
			gone = append(gone, p)
		case seq >= r.From && (src == "" || seq > t.sources[src]):
			src = p
		}
	}
	if src != "" {
		r.To = min(r.To, t.sources[src])
	}
	return r, src, gone
}

// fetch asks connected peer p for the ranges rs in one request and appends
// what comes, in order, a batch of entries per transaction (one fsync per
// batch, not per entry); fetchBatchBytes bounds what it holds. Each range
// records how many entries were stored and the first the store refused;
// the error is the exchange's (a broken stream, a peer serving what was
// not asked for).
func (f *Feeds) fetch(ctx context.Context, p peer.ID, rs []*fetchRange) error {
	s, done, err := f.openSync(ctx, p, syncTimeout)
	if err != nil {
		return err
	}
	defer done()
	req := syncRequest{Kind: "ranges", Ranges: make([]syncRange, len(rs))}
	for i, r := range rs {
		req.Ranges[i] = r.syncRange
	}
	if err := writeMsg(s, req); err != nil {
		return err
	}
	var batch []*ledger.SignedEntry
	var owner []*fetchRange
	size := 0
	flush := func() {
		f.storeBatch(batch, owner)
		batch, owner, size = batch[:0], owner[:0], 0
	}
	defer flush() // keep what came, whatever happens next
	for _, r := range rs {
		for i := r.From; ; i++ {
			raw, err := p2p.ReadFrame(s, ledger.MaxEntryBytes+1024)
			if err != nil {
				return err
			}
			if len(raw) == 0 {
				break // the end of what the peer holds of this range
			}
			e, se, err := peekEntry(raw)
			if err != nil || e.Author != r.Author || e.Seq != i || i > r.To {
				return errors.New("ledger sync: peer served an entry not asked for")
			}
			batch, owner = append(batch, se), append(owner, r)
			if size += len(raw); size >= fetchBatchBytes {
				flush()
			}
		}
	}
	return nil
}

// storeBatch appends entries (of the feeds owner names, each feed's in
// order) in one transaction, shared with other peers' concurrent ranges
// (ledger.Store.AppendReplicated), records per feed what was stored or
// refused, and announces the new heads. An equivocation is published as a
// proof.
func (f *Feeds) storeBatch(batch []*ledger.SignedEntry, owner []*fetchRange) {
	if len(batch) == 0 {
		return
	}
	errs, err := f.store.AppendReplicated(batch) // a group commit with other peers' ranges
	if err != nil {
		for _, r := range owner {
			if r.err == nil {
				r.err = err
			}
		}
		return
	}
	advanced := make(map[*fetchRange]int) // index in batch of the feed's last stored entry
	for i, r := range owner {
		switch {
		case r.err != nil:
		case errs[i] != nil:
			r.err = errs[i]
			if errors.Is(errs[i], ledger.ErrEquivocation) {
				if proof, ok := f.store.Frozen(r.Author); ok {
					f.log.Warn("equivocation: feed frozen", "author", r.Author)
					f.publish(ledgerHead{Author: r.Author, Proof: proof})
				}
			}
		default:
			// Our own feed, recovered at start, is no foreign feed to count.
			if r.checked == 0 && r.From+uint64(r.stored) == 1 && r.Author != f.host.ID().String() {
				f.wants.stored(r.Author)
			}
			r.stored++
			advanced[r] = i
		}
	}
	for r, i := range advanced {
		if r.checked == 0 {
			f.announce(ledgerHead{Author: r.Author, Seq: r.From + uint64(r.stored) - 1, CID: batch[i].CID().String()})
		}
	}
}

// entryPeek decodes an entry just far enough to see whose and which it is.
var entryPeek = canon.Decoder(8, 1024, 64)

// peekEntry reads author and seq from a served entry without checking it:
// Store.AppendBatch checks everything (size, encoding, schema, signature,
// chain) before it stores, and checking twice would double the cost of a
// sync.
func peekEntry(raw []byte) (*ledger.Entry, *ledger.SignedEntry, error) {
	var se ledger.SignedEntry
	if err := entryPeek.Unmarshal(raw, &se); err != nil {
		return nil, nil, err
	}
	var e ledger.Entry
	if err := entryPeek.Unmarshal(se.Body, &e); err != nil {
		return nil, nil, err
	}
	return &e, &se, nil
}
