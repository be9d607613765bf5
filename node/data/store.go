package data

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/exchange/offline"
	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	"github.com/ipfs/go-datastore/query"
	leveldb "github.com/ipfs/go-ds-leveldb"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// ErrQuota is wrapped by a write that would take the store past its quota.
var ErrQuota = errors.New("data store quota reached")

// Store keeps a node's blocks and pins on disk: go-ds-leveldb (kubo's
// leveldb datastore, crash-safe through leveldb's journal) under one
// directory, behind boxo's blockstore, with a byte quota on what the
// blocks take and garbage collection of whatever no pin reaches.
type Store struct {
	db    *leveldb.Datastore
	bs    blockstore.Blockstore
	dag   ipld.DAGService
	quota int64

	// gcMu keeps GC out while something writes blocks it means to pin:
	// Add holds it shared from the first block to the pin, GC holds it
	// exclusively, so a fresh DAG is never swept before its pin exists.
	gcMu sync.RWMutex
	// mu guards used, so two writers of the same new block cannot both
	// count it.
	mu   sync.RWMutex
	used int64 // bytes of block data stored, kept in step with Put and Delete
}

// MaxBlockBytes is the largest block the store accepts: bitswap's own
// limit, and far above the 256 KiB chunks an import writes.
const MaxBlockBytes = 2 << 20

var pinPrefix = ds.NewKey("/pins")

// OpenStore opens (or creates) the store in dir with a quota of quota
// bytes of block data; quota <= 0 is refused rather than read as
// "unlimited", since a provider's disk is not.
func OpenStore(dir string, quota int64) (*Store, error) {
	if quota <= 0 {
		return nil, fmt.Errorf("data store quota %d: must be a positive number of bytes", quota)
	}
	db, err := leveldb.NewDatastore(dir, storeOptions())
	if err != nil {
		return nil, fmt.Errorf("open data store %s: %w", dir, err)
	}
	s := &Store{db: db, quota: quota}
	// WriteThrough: quotaBlockstore.PutMany has already asked Has of every
	// block it passes down (it must, to count only new bytes), so boxo's
	// blockstore asking again would only double the lookups.
	s.bs = &quotaBlockstore{Blockstore: blockstore.NewBlockstore(db, blockstore.WriteThrough(true)), s: s}
	s.dag = merkledag.NewDAGService(blockservice.New(s.bs, offline.Exchange(s.bs)))
	used, err := s.measure(context.Background())
	if err != nil {
		db.Close()
		return nil, err
	}
	s.used = used
	return s, nil
}

// storeOptions tunes leveldb for what the store holds: few keys, each up
// to MaxBlockBytes (256 KiB chunks, mostly) of hashed, incompressible
// data. None of them touches durability: go-ds-leveldb still writes every
// Put and batch with Sync, through the journal (NoSync stays false),
// which is what the crash-safety claim rests on. Each is a bound
// independent of how much is stored, so memory stays flat however large
// the DAGs.
func storeOptions() *leveldb.Options {
	return &leveldb.Options{
		// Blocks are file data and hashes: snappy finds nothing to gain
		// and costs a pass over every byte on each flush and compaction.
		// Trade: a store of compressible files (text) takes more disk.
		Compression: opt.NoCompression,
		// A bloom filter per table lets Has and Get of an absent key (every
		// new block's quota check, a fetch's "is it here") skip reading a
		// 256 KiB data block from each table whose range overlaps it.
		// Trade: ~10 bits per key of memory and disk, a few KiB per GiB.
		Filter: filter.NewBloomFilter(10),
		// A larger memtable (leveldb's default is 4 MiB) means fewer,
		// larger level-0 flushes. Trade: up to twice this of heap per
		// store (the memtable being flushed and the next; 32 MiB measured
		// no faster and held 130 MiB in an import), and this much journal
		// to replay after a crash.
		WriteBuffer: 8 << 20,
		// Larger tables mean fewer files and fewer compactions of the
		// same bytes. Trade: a compaction step rewrites up to this much
		// at once.
		CompactionTableSize: 16 << 20,
		// Level 1 holds this much before it spills to level 2 (x10 per
		// level after; leveldb's default is 10 MiB). Block keys are
		// hashes, so every table spans nearly the whole key range and each
		// compaction into a level rewrites all of that level: the fewer
		// levels a store's bytes pass through, the fewer times each is
		// rewritten (a 1 GiB import: 41 MB/s with 128 MiB here and level-0
		// trigger 8, 93 MB/s with these). Trade: a compaction into level 1
		// may rewrite up to this much at once, and beyond it the
		// rewrites grow again; the remedy there is a file per block for
		// block data, not more tuning.
		CompactionTotalSize: 1 << 30,
		// Let level 0 take many flushes (32 x WriteBuffer, 256 MiB) before
		// compacting into level 1, and more before slowing or pausing
		// writes, so that an import or fetch is not stalled behind
		// compaction. Trade: a read looks in up to that many level-0
		// tables, each skipped by its bloom filter unless it holds the
		// key, and the compaction, when it comes, is larger.
		CompactionL0Trigger:    32,
		WriteL0SlowdownTrigger: 48,
		WriteL0PauseTrigger:    64,
		// Block cache stays at leveldb's 8 MiB: a served block is read once,
		// so caching 256 KiB values buys little; the bound keeps memory flat.
		BlockCacheCapacity: opt.DefaultBlockCacheCapacity,
	}
}

// Close waits for a running GC and writes, then closes the database.
func (s *Store) Close() error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Close()
}

// Blockstore is the store's blocks, for an exchange (bitswap) to serve from
// and fetch into.
func (s *Store) Blockstore() blockstore.Blockstore { return s.bs }

// DAG reads and writes only local blocks.
func (s *Store) DAG() ipld.DAGService { return s.dag }

// Used is the bytes of block data stored; Quota the most it may hold.
func (s *Store) Used() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.used
}

// Quota is the most block data the store may hold, in bytes.
func (s *Store) Quota() int64 { return s.quota }

// Add imports the file or tree at path and pins it, so that GC keeps it.
func (s *Store) Add(ctx context.Context, path string) (cid.Cid, error) {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	c, err := Import(ctx, s.dag, path, CIDv1)
	if err != nil {
		return cid.Undef, err
	}
	return c, s.pin(ctx, c)
}

// Pin records c as a root that GC keeps. It does not fetch anything: a pin
// of a DAG whose blocks are not all here keeps those that are.
func (s *Store) Pin(ctx context.Context, c cid.Cid) error {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	return s.pin(ctx, c)
}

// fillAndPin runs fill, which writes the blocks of root's DAG (a fetch from
// peers), and then pins root, with GC held off from the first block to the
// pin, as Add does: a partly written DAG is never swept just before its pin
// would have kept it. Nothing is pinned if fill fails.
func (s *Store) fillAndPin(ctx context.Context, root cid.Cid, fill func(context.Context) error) error {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	if err := fill(ctx); err != nil {
		return err
	}
	return s.pin(ctx, root)
}

func (s *Store) pin(ctx context.Context, c cid.Cid) error {
	if !c.Defined() {
		return errors.New("pin: no CID given")
	}
	return s.db.Put(ctx, pinPrefix.ChildString(c.String()), nil)
}

// Unpin forgets the root c; its blocks go at the next GC unless another
// pin reaches them. Unpinning what is not pinned is not an error.
func (s *Store) Unpin(ctx context.Context, c cid.Cid) error {
	return s.db.Delete(ctx, pinPrefix.ChildString(c.String()))
}

// Pins lists the pinned roots.
func (s *Store) Pins(ctx context.Context) ([]cid.Cid, error) {
	res, err := s.db.Query(ctx, query.Query{Prefix: pinPrefix.String(), KeysOnly: true})
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var pins []cid.Cid
	for r := range res.Next() {
		if r.Error != nil {
			return nil, r.Error
		}
		c, err := cid.Decode(ds.RawKey(r.Key).BaseNamespace())
		if err != nil {
			continue // Pin writes only decodable CIDs; a damaged key pins nothing
		}
		pins = append(pins, c)
	}
	return pins, nil
}

// GCResult says what a collection removed.
type GCResult struct {
	Removed int   // blocks
	Freed   int64 // bytes
}

// GC deletes every block that no pin reaches. Blocks are keyed by
// multihash, so marking is by multihash too: the same bytes under CIDv0
// and CIDv1 are one block.
func (s *Store) GC(ctx context.Context) (GCResult, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	pins, err := s.Pins(ctx)
	if err != nil {
		return GCResult{}, err
	}
	keep := map[string]bool{}    // multihashes: what the blockstore is keyed by
	visited := map[string]bool{} // full CIDs
	// Walking is by full CID: the same bytes reached first as raw (no
	// links) must still be read as dag-pb where another pin names them so.
	getLinks := func(ctx context.Context, c cid.Cid) ([]*ipld.Link, error) {
		if c.Type() == cid.Raw {
			return nil, nil // file data: nothing below it, no need to read it
		}
		links, err := merkledag.GetLinksDirect(s.dag)(ctx, c)
		if err != nil && ctx.Err() == nil {
			// Missing or undecodable: keep the block, know nothing below.
			return nil, nil
		}
		return links, err
	}
	for _, p := range pins {
		err := merkledag.Walk(ctx, getLinks, p, func(c cid.Cid) bool {
			if visited[c.KeyString()] {
				return false // a shared subtree is read once, however many link to it
			}
			visited[c.KeyString()] = true
			keep[string(c.Hash())] = true
			return true
		})
		if err != nil {
			return GCResult{}, fmt.Errorf("mark from pin %s: %w", p, err)
		}
	}
	walkCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys, err := s.bs.AllKeysChan(walkCtx)
	if err != nil {
		return GCResult{}, err
	}
	var doomed []cid.Cid
	for c := range keys {
		if !keep[string(c.Hash())] {
			doomed = append(doomed, c)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out GCResult
	for _, c := range doomed {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		n, err := s.deleteLocked(ctx, c)
		if err != nil {
			return out, err
		}
		out.Removed++
		out.Freed += int64(n)
	}
	return out, nil
}

// deleteLocked removes one block and its bytes from the count; s.mu is
// held.
func (s *Store) deleteLocked(ctx context.Context, c cid.Cid) (int, error) {
	raw := s.bs.(*quotaBlockstore).Blockstore
	n, err := raw.GetSize(ctx, c)
	if ipld.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := raw.DeleteBlock(ctx, c); err != nil {
		return 0, err
	}
	s.used -= int64(n)
	return n, nil
}

// measure sums the stored blocks' sizes, once at open.
func (s *Store) measure(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys, err := s.bs.AllKeysChan(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for c := range keys {
		n, err := s.bs.GetSize(ctx, c)
		if err != nil {
			return 0, err
		}
		total += int64(n)
	}
	return total, nil
}

// quotaBlockstore refuses a block that would take the store past its
// quota, before a byte of it is written.
type quotaBlockstore struct {
	blockstore.Blockstore
	s *Store
}

func (q *quotaBlockstore) Put(ctx context.Context, b blocks.Block) error {
	return q.PutMany(ctx, []blocks.Block{b})
}

func (q *quotaBlockstore) PutMany(ctx context.Context, bs []blocks.Block) error {
	// Writes take the lock exclusively: two writers of the same new block
	// would otherwise both count it.
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	var add int64
	fresh := bs[:0:0]
	seen := map[string]bool{} // the same bytes twice in one batch are stored once
	for _, b := range bs {
		if len(b.RawData()) > MaxBlockBytes {
			return fmt.Errorf("block %s is %d bytes, limit %d", b.Cid(), len(b.RawData()), MaxBlockBytes)
		}
		k := string(b.Cid().Hash())
		if seen[k] {
			continue
		}
		seen[k] = true
		has, err := q.Blockstore.Has(ctx, b.Cid())
		if err != nil {
			return err
		}
		if !has {
			fresh = append(fresh, b)
			add += int64(len(b.RawData()))
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if q.s.used+add > q.s.quota {
		return fmt.Errorf("%w: %d bytes more would exceed %d (in use %d); run GC or raise the quota", ErrQuota, add, q.s.quota, q.s.used)
	}
	if err := q.Blockstore.PutMany(ctx, fresh); err != nil {
		return err
	}
	q.s.used += add
	return nil
}

func (q *quotaBlockstore) DeleteBlock(ctx context.Context, c cid.Cid) error {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	_, err := q.s.deleteLocked(ctx, c)
	return err
}
