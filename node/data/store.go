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

	// mu orders GC against writes: a block written while GC marks could
	// be swept before the pin that needs it is recorded.
	mu   sync.RWMutex
	used int64 // bytes of block data stored, kept in step with Put and Delete
}

var pinPrefix = ds.NewKey("/pins")

// OpenStore opens (or creates) the store in dir with a quota of quota
// bytes of block data; quota <= 0 is refused rather than read as
// "unlimited", since a provider's disk is not.
func OpenStore(dir string, quota int64) (*Store, error) {
	if quota <= 0 {
		return nil, fmt.Errorf("data store quota %d: must be a positive number of bytes", quota)
	}
	db, err := leveldb.NewDatastore(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("open data store %s: %w", dir, err)
	}
	s := &Store{db: db, quota: quota}
	s.bs = &quotaBlockstore{Blockstore: blockstore.NewBlockstore(db), s: s}
	s.dag = merkledag.NewDAGService(blockservice.New(s.bs, offline.Exchange(s.bs)))
	used, err := s.measure(context.Background())
	if err != nil {
		db.Close()
		return nil, err
	}
	s.used = used
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

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
	c, err := Import(ctx, s.dag, path, CIDv1)
	if err != nil {
		return cid.Undef, err
	}
	return c, s.Pin(ctx, c)
}

// Pin records c as a root that GC keeps. It does not fetch anything: a pin
// of a DAG whose blocks are not all here keeps those that are.
func (s *Store) Pin(ctx context.Context, c cid.Cid) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Put(ctx, pinPrefix.ChildString(c.String()), nil)
}

// Unpin forgets the root c; its blocks go at the next GC unless another
// pin reaches them. Unpinning what is not pinned is not an error.
func (s *Store) Unpin(ctx context.Context, c cid.Cid) error {
	s.mu.Lock()
	defer s.mu.Unlock()
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
			return nil, fmt.Errorf("pin %q in the data store: %w", r.Key, err)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	pins, err := s.Pins(ctx)
	if err != nil {
		return GCResult{}, err
	}
	marked := map[string]bool{}
	getLinks := func(ctx context.Context, c cid.Cid) ([]*ipld.Link, error) {
		links, err := merkledag.GetLinksDirect(s.dag)(ctx, c)
		if ipld.IsNotFound(err) {
			return nil, nil // a partial DAG keeps what it has
		}
		return links, err
	}
	for _, p := range pins {
		err := merkledag.Walk(ctx, getLinks, p, func(c cid.Cid) bool {
			k := string(c.Hash())
			if marked[k] {
				return false
			}
			marked[k] = true
			return true
		})
		if err != nil {
			return GCResult{}, fmt.Errorf("mark from pin %s: %w", p, err)
		}
	}
	keys, err := s.bs.AllKeysChan(ctx)
	if err != nil {
		return GCResult{}, err
	}
	var out GCResult
	var doomed []cid.Cid
	for c := range keys {
		if !marked[string(c.Hash())] {
			doomed = append(doomed, c)
		}
	}
	for _, c := range doomed {
		n, err := s.bs.GetSize(ctx, c)
		if err != nil {
			return out, err
		}
		if err := s.deleteLocked(ctx, c); err != nil {
			return out, err
		}
		out.Removed++
		out.Freed += int64(n)
	}
	return out, ctx.Err()
}

// deleteLocked removes one block and its bytes from the count; s.mu is
// held.
func (s *Store) deleteLocked(ctx context.Context, c cid.Cid) error {
	raw := s.bs.(*quotaBlockstore).Blockstore
	n, err := raw.GetSize(ctx, c)
	if ipld.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := raw.DeleteBlock(ctx, c); err != nil {
		return err
	}
	s.used -= int64(n)
	return nil
}

// measure sums the stored blocks' sizes, once at open.
func (s *Store) measure(ctx context.Context) (int64, error) {
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
	for _, b := range bs {
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
	return q.s.deleteLocked(ctx, c)
}
