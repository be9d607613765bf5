package data

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multihash"
)

// Access decides which peers the exchange serves which blocks to. Data is
// private by default: a block is served only when it is reachable from a
// root that is public (Publish), or from a root granted to the asking
// peer that has not lapsed (Grant). Everything else is answered as if the
// node did not have it (bitswap's DONT_HAVE), so a stranger learns nothing
// of what is here.
//
// Allow is on bitswap's receive path, once per wanted block, so it is map
// lookups under a read lock and nothing more: a root's blocks are found
// once, when it is published or granted, by walking its DAG in the local
// store, and kept as a set of block keys (32 bytes each) until the last
// grant or the public mark on it goes. MaxBlocks bounds them all, so the
// memory is bounded whatever peers ask.
type Access struct {
	dag   blockGetter
	limit int

	mu      sync.RWMutex
	public  map[blockKey]int32 // blocks reachable from public roots, by how many
	peers   map[peer.ID]*peerAccess
	roots   map[string]*rootIndex // by root's KeyString: the blocks indexed for it
	indexed int                   // sum of len(rootIndex.blocks)
	timer   *time.Timer           // fires at the earliest grant's end
	closed  bool                  // Close ran: no timer is set again

	refused atomic.Int64
	// OnRefuse, when set before use, hears of every refused want (from
	// bitswap's receive path: it must not block).
	OnRefuse func(peer.ID, cid.Cid)
}

// DefaultMaxAccessBlocks bounds the blocks Access keeps track of: 2^21
// blocks of 256 KiB are 512 GiB of public or granted data, in about 160
// MiB of memory.
const DefaultMaxAccessBlocks = 1 << 21

// ErrAccessIndexFull is wrapped by a Publish or Grant whose DAG would take
// Access past its bound.
var ErrAccessIndexFull = errors.New("too many public or granted blocks to track")

// blockKey names a block by the SHA-256 of its bytes (the digest itself
// for the sha2-256 multihashes gleaner writes): blocks are stored by
// multihash, so the same bytes under CIDv0 and CIDv1 are one key.
type blockKey [32]byte

func keyOf(c cid.Cid) blockKey {
	h := c.Hash()
	if d, err := multihash.Decode(h); err == nil && d.Code == multihash.SHA2_256 && len(d.Digest) == 32 {
		return blockKey(d.Digest)
	}
	return sha256.Sum256(h)
}

type peerAccess struct {
	blocks map[blockKey]int32   // by how many of the peer's grants reach them
	grants map[string]time.Time // root KeyString -> end of the grant
}

type rootIndex struct {
	root   cid.Cid
	blocks []blockKey
	refs   int // the public mark and each peer granted it
	public bool
}

type blockGetter interface {
	getRaw(ctx context.Context, c cid.Cid) ([]byte, bool, error)
}

// NewAccess tracks access to s's blocks; maxBlocks <= 0 means
// DefaultMaxAccessBlocks.
func NewAccess(s *Store, maxBlocks int) *Access {
	if maxBlocks <= 0 {
		maxBlocks = DefaultMaxAccessBlocks
	}
	return &Access{dag: storeGetter{s}, limit: maxBlocks, public: map[blockKey]int32{},
		peers: map[peer.ID]*peerAccess{}, roots: map[string]*rootIndex{}}
}

// Allow says whether p may be sent the block c. It is the bitswap
// server's request filter.
func (a *Access) Allow(p peer.ID, c cid.Cid) bool {
	k := keyOf(c)
	a.mu.RLock()
	ok := a.public[k] > 0
	if !ok {
		if pa := a.peers[p]; pa != nil && pa.blocks[k] > 0 {
			ok = true
		}
	}
	a.mu.RUnlock()
	if !ok {
		a.refused.Add(1)
		if a.OnRefuse != nil {
			a.OnRefuse(p, c)
		}
	}
	return ok
}

// Refused is how many wants Allow refused since the start.
func (a *Access) Refused() int64 { return a.refused.Load() }

// Publish makes the DAG under root, as it is in the store now, servable
// to any peer.
func (a *Access) Publish(ctx context.Context, root cid.Cid) error {
	a.mu.RLock()
	ri := a.roots[root.KeyString()]
	done := ri != nil && ri.public
	a.mu.RUnlock()
	if done {
		return nil
	}
	ri, err := a.index(ctx, root)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ri = a.adoptLocked(ri)
	if ri.public {
		return nil
	}
	ri.public = true
	ri.refs++
	for _, k := range ri.blocks {
		a.public[k]++
	}
	return nil
}

// Unpublish makes root private again (its blocks stay servable where
// another public root or a grant reaches them).
func (a *Access) Unpublish(root cid.Cid) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ri := a.roots[root.KeyString()]
	if ri == nil || !ri.public {
		return
	}
	ri.public = false
	for _, k := range ri.blocks {
		if a.public[k]--; a.public[k] <= 0 {
			delete(a.public, k)
		}
	}
	a.releaseLocked(ri)
}

// IsPublic says whether root was published.
func (a *Access) IsPublic(root cid.Cid) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	ri := a.roots[root.KeyString()]
	return ri != nil && ri.public
}

// Grant lets p fetch the DAG under root until until; a grant of the same
// root to the same peer moves its end. A grant whose end has passed is
// no grant.
func (a *Access) Grant(ctx context.Context, p peer.ID, root cid.Cid, until time.Time) error {
	if !time.Now().Before(until) {
		a.Revoke(p, root)
		return nil
	}
	ri, err := a.index(ctx, root)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ri = a.adoptLocked(ri)
	pa := a.peers[p]
	if pa == nil {
		pa = &peerAccess{blocks: map[blockKey]int32{}, grants: map[string]time.Time{}}
		a.peers[p] = pa
	}
	rk := root.KeyString()
	if _, had := pa.grants[rk]; !had {
		ri.refs++
		for _, k := range ri.blocks {
			pa.blocks[k]++
		}
	}
	pa.grants[rk] = until
	a.scheduleLocked()
	return nil
}

// Revoke ends p's grant of root, if it has one.
func (a *Access) Revoke(p peer.ID, root cid.Cid) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revokeLocked(p, root.KeyString())
}

func (a *Access) revokeLocked(p peer.ID, rk string) {
	pa := a.peers[p]
	if pa == nil {
		return
	}
	if _, ok := pa.grants[rk]; !ok {
		return
	}
	delete(pa.grants, rk)
	if ri := a.roots[rk]; ri != nil {
		for _, k := range ri.blocks {
			if pa.blocks[k]--; pa.blocks[k] <= 0 {
				delete(pa.blocks, k)
			}
		}
		a.releaseLocked(ri)
	}
	if len(pa.grants) == 0 {
		delete(a.peers, p)
	}
}

// Granted says whether p holds a grant of root that has not ended.
func (a *Access) Granted(p peer.ID, root cid.Cid) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	pa := a.peers[p]
	if pa == nil {
		return false
	}
	until, ok := pa.grants[root.KeyString()]
	return ok && time.Now().Before(until)
}

// Tracked is how many block keys Access holds for public and granted
// roots (each root's blocks once, however many peers it is granted to).
func (a *Access) Tracked() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.indexed
}

// Expire ends every grant whose end is not after now.
func (a *Access) Expire(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(now)
	a.scheduleLocked()
}

func (a *Access) expireLocked(now time.Time) {
	for p, pa := range a.peers {
		for rk, until := range pa.grants {
			if !now.Before(until) {
				a.revokeLocked(p, rk)
			}
		}
	}
}

// scheduleLocked sets the timer to the earliest grant's end.
func (a *Access) scheduleLocked() {
	var next time.Time
	for _, pa := range a.peers {
		for _, until := range pa.grants {
			if next.IsZero() || until.Before(next) {
				next = until
			}
		}
	}
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	if next.IsZero() || a.closed {
		return
	}
	a.timer = time.AfterFunc(time.Until(next)+time.Millisecond, func() { a.Expire(time.Now()) })
}

// Close stops the expiry timer.
func (a *Access) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

// adoptLocked returns the tracked index of ri's root: ri, put back if
// its last reference went between index and the caller's lock.
func (a *Access) adoptLocked(ri *rootIndex) *rootIndex {
	rk := ri.root.KeyString()
	if cur := a.roots[rk]; cur != nil {
		return cur
	}
	ri.refs, ri.public = 0, false
	a.roots[rk] = ri
	a.indexed += len(ri.blocks)
	return ri
}

// releaseLocked drops one reference to ri, and its blocks with the last.
func (a *Access) releaseLocked(ri *rootIndex) {
	if ri.refs--; ri.refs > 0 {
		return
	}
	if a.roots[ri.root.KeyString()] == ri {
		delete(a.roots, ri.root.KeyString())
		a.indexed -= len(ri.blocks)
	}
}

// index returns root's block set, walking its DAG in the store if it is
// not tracked yet. The walk runs without the lock: bitswap keeps being
// answered meanwhile.
func (a *Access) index(ctx context.Context, root cid.Cid) (*rootIndex, error) {
	rk := root.KeyString()
	a.mu.RLock()
	ri := a.roots[rk]
	left := a.limit - a.indexed
	a.mu.RUnlock()
	if ri != nil {
		return ri, nil
	}
	blocks, err := walkBlocks(ctx, a.dag, root, left)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ri := a.roots[rk]; ri != nil {
		return ri, nil // indexed meanwhile
	}
	if a.indexed+len(blocks) > a.limit {
		return nil, fmt.Errorf("%w: %s has %d blocks, %d of %d in use", ErrAccessIndexFull, root, len(blocks), a.indexed, a.limit)
	}
	ri = &rootIndex{root: root, blocks: blocks}
	a.roots[rk] = ri
	a.indexed += len(blocks)
	return ri, nil
}

// walkBlocks lists the blocks of the DAG under root that the store holds,
// each once, reading only the dag-pb nodes (a raw leaf is known from its
// parent's link). A block not here ends its branch: what is fetched later
// is not served until the root is granted or published again.
func walkBlocks(ctx context.Context, g blockGetter, root cid.Cid, limit int) ([]blockKey, error) {
	seen := map[blockKey]bool{}
	var out []blockKey
	queue := []cid.Cid{root}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		k := keyOf(c)
		if seen[k] || c.Prefix().MhType == multihash.IDENTITY {
			continue
		}
		seen[k] = true
		if len(out) >= limit {
			return nil, fmt.Errorf("%w: %s has more than the %d blocks left", ErrAccessIndexFull, root, limit)
		}
		if c.Type() != cid.DagProtobuf {
			out = append(out, k) // a raw leaf, or a codec gleaner does not link through
			continue
		}
		raw, ok, err := g.getRaw(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("index %s: block %s: %w", root, c, err)
		}
		if !ok {
			continue // not here: nothing to serve
		}
		out = append(out, k)
		n, err := merkledag.DecodeProtobuf(raw)
		if err != nil {
			continue // served as the bytes it is; nothing below it is known
		}
		for _, l := range n.Links() {
			queue = append(queue, l.Cid)
		}
	}
	return out, nil
}

type storeGetter struct{ s *Store }

func (g storeGetter) getRaw(ctx context.Context, c cid.Cid) ([]byte, bool, error) {
	b, err := g.s.Blockstore().Get(ctx, c)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b.RawData(), true, nil
}
