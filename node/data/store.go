package data

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/exchange/offline"
	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	"github.com/ipfs/go-datastore/query"
	flatfs "github.com/ipfs/go-ds-flatfs"
	leveldb "github.com/ipfs/go-ds-leveldb"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// ErrQuota is wrapped by a write that would take the store past its quota.
var ErrQuota = errors.New("data store quota reached")

// Store keeps a node's blocks and pins on disk under one directory, with a
// byte quota on what the blocks take and garbage collection of whatever no
// pin reaches:
//
//   - block data in go-ds-flatfs (kubo's block store) under dir/blocks: a
//     file per block, in up to 1,024 directories named by the
//     next-to-last two characters of its key; a write puts each block in
//     a temporary file and renames it into place, then syncs the
//     filesystem once (putSettled: the blocks are recorded in the index
//     first, and an open after a crash checks them), so a block is whole
//     or absent after a crash, and every byte is written once;
//   - the index in go-ds-leveldb at dir itself: pins, the record of a
//     block write in progress (putSettled), and the bytes the blocks
//     take as of the last clean close (its absence after a crash means
//     the count is taken again from the files).
//
// A store written before the file-per-block layout kept its blocks in the
// leveldb database too; OpenStore moves them out (migrate).
type Store struct {
	db     *leveldb.Datastore // the index: pins, and metaUsed
	blocks *flatfs.Datastore  // block data, a file per block
	// blocksDir is the blocks' directory, held open for syncBlocks.
	blocksDir *os.File
	bs        blockstore.Blockstore
	dag       ipld.DAGService
	quota     int64

	// gcMu keeps GC out while something writes blocks it means to pin:
	// Add holds it shared from the first block to the pin, GC holds it
	// exclusively, so a fresh DAG is never swept before its pin exists.
	gcMu sync.RWMutex
	// mu guards used, so two writers of the same new block cannot both
	// count it.
	mu   sync.RWMutex
	used int64 // bytes of block data stored, kept in step with Put and Delete

	// beforeWrite, when set (by tests, before the store is written to),
	// runs at the start of every block write with the number of blocks
	// given: a slow disk stands in so.
	beforeWrite func(blocks int)
}

// MaxBlockBytes is the largest block the store accepts: bitswap's own
// limit, and far above the 256 KiB chunks an import writes.
const MaxBlockBytes = 2 << 20

var (
	pinPrefix = ds.NewKey("/pins")
	// metaUsed holds the bytes of block data, written at a clean Close and
	// deleted at open: present only while the store is closed cleanly.
	metaUsed = ds.NewKey("/meta/used")
	// oldBlockPrefix is where a leveldb-only store (before flatfs) kept
	// its blocks: boxo's blockstore namespace.
	oldBlockPrefix = ds.NewKey("/blocks")
)

// blocksDir is the flatfs directory inside the store's directory.
const blocksDir = "blocks"

// OpenStore opens (or creates) the store in dir with a quota of quota
// bytes of block data; quota <= 0 is refused rather than read as
// "unlimited", since a provider's disk is not. A store of the older
// leveldb-only layout is migrated first (migrate): its blocks move into
// the file-per-block store, its pins stay.
func OpenStore(dir string, quota int64) (*Store, error) {
	if quota <= 0 {
		return nil, fmt.Errorf("data store quota %d: must be a positive number of bytes", quota)
	}
	db, err := leveldb.NewDatastore(dir, storeOptions())
	if err != nil {
		return nil, fmt.Errorf("open data store %s: %w", dir, err)
	}
	// flatfs's own sync (each block's file synced before its rename, the
	// directories after) is off where the store syncs the filesystem
	// once per write instead (putSettled). kubo turns it off with nothing
	// in its place and risks empty block files after a power cut.
	blocks, err := flatfs.CreateOrOpen(filepath.Join(dir, blocksDir), flatfs.NextToLast(2), flatfsSyncsEachFile)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open data store %s: blocks: %w", dir, err)
	}
	blocksDirFile, err := os.Open(filepath.Join(dir, blocksDir))
	if err != nil {
		blocks.Close()
		db.Close()
		return nil, fmt.Errorf("open data store %s: blocks: %w", dir, err)
	}
	s := &Store{db: db, blocks: blocks, blocksDir: blocksDirFile, quota: quota}
	// NoPrefix: flatfs keys are one path component, the block's base32
	// multihash, and the directory is the blocks' alone. WriteThrough:
	// quotaBlockstore.PutMany has already asked Has of every block it
	// passes down (it must, to count only new bytes), so boxo's
	// blockstore asking again would only double the lookups.
	s.bs = &quotaBlockstore{Blockstore: blockstore.NewBlockstore(blocks, blockstore.NoPrefix(), blockstore.WriteThrough(true)), s: s}
	s.dag = merkledag.NewDAGService(blockservice.New(s.bs, offline.Exchange(s.bs)))
	if err := s.open(context.Background()); err != nil {
		blocksDirFile.Close()
		blocks.Close()
		db.Close()
		return nil, fmt.Errorf("open data store %s: %w", dir, err)
	}
	return s, nil
}

// open migrates an old layout and counts the bytes stored: the count a
// clean Close left, or a walk over the block files when there is none (a
// new store, an old one, or a crash since the last open). The count left
// is deleted before any write, so that a crash from here on makes the next
// open count again.
func (s *Store) open(ctx context.Context) error {
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if err := s.settle(ctx); err != nil {
		return fmt.Errorf("check the blocks of a write cut short: %w", err)
	}
	v, err := s.db.Get(ctx, metaUsed)
	if err == nil && len(v) == 8 {
		if err := s.db.Delete(ctx, metaUsed); err != nil {
			return err
		}
		s.used = int64(binary.BigEndian.Uint64(v))
		return nil
	}
	if err != nil && !errors.Is(err, ds.ErrNotFound) {
		return err
	}
	used, err := s.measure(ctx)
	if err != nil {
		return err
	}
	s.used = used
	return nil
}

// storeOptions tunes leveldb for what it holds now: the index (pins, a
// few bytes each), and, until migrate has moved them, an old store's
// blocks. Durability is untouched: go-ds-leveldb writes every Put and
// batch with Sync, through the journal. Each is a bound independent of
// how much is stored, so memory stays flat however large the DAGs.
func storeOptions() *leveldb.Options {
	return &leveldb.Options{
		// An old store's blocks are hashed, incompressible data: snappy
		// finds nothing to gain while migrate reads them.
		Compression: opt.NoCompression,
		// A lookup of an absent pin skips tables whose filter says no.
		Filter: filter.NewBloomFilter(10),
		// leveldb's defaults otherwise (4 MiB write buffer, 8 MiB block
		// cache): the index is small.
		BlockCacheCapacity: opt.DefaultBlockCacheCapacity,
	}
}

// Close waits for a running GC and writes, records the bytes stored (so
// that the next open need not count them) and closes both stores.
func (s *Store) Close() error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s.used))
	err := s.db.Put(context.Background(), metaUsed, b[:])
	err = errors.Join(err, s.blocks.Close(), s.blocksDir.Close())
	return errors.Join(err, s.db.Close())
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
// would have kept it. Nothing is pinned if fill fails or ctx ended.
func (s *Store) fillAndPin(ctx context.Context, root cid.Cid, fill func(context.Context) error) error {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	if err := fill(ctx); err != nil {
		return err
	}
	// A fill that finished just as its caller gave up (a bound crossed
	// in its last batch, a cancel) pins nothing: the caller is told it
	// failed, so a pin would hold blocks nobody will unpin.
	if ctx.Err() != nil {
		return context.Cause(ctx)
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

// measure sums the block files' sizes: a directory walk and a stat per
// block, at an open that found no count left by a clean Close.
func (s *Store) measure(ctx context.Context) (int64, error) {
	res, err := s.blocks.Query(ctx, query.Query{KeysOnly: true, ReturnsSizes: true})
	if err != nil {
		return 0, err
	}
	defer res.Close()
	var total int64
	for r := range res.Next() {
		if r.Error != nil {
			return 0, r.Error
		}
		total += int64(r.Size)
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
	if q.s.beforeWrite != nil {
		q.s.beforeWrite(len(bs))
	}
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
	if err := q.s.putSettled(ctx, q.Blockstore, fresh); err != nil {
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
