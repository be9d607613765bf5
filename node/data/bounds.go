package data

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multihash"
)

// Bounds on a DAG that someone else names and this node writes out: a
// job's inputs on a provider, a job's outputs on its renter (issue 34).
//
// A DAG is a graph, not a tree: a folder whose 2,000 entries all link one
// 256 KiB block is about 400 KB to fetch and 500 MB to write out, and a
// few levels of such folders describe terabytes. Nothing a DAG claims
// about itself (a link's Tsize, a file's filesize) is trusted here. The
// cost of writing a DAG out is measured on its blocks (Expand): every
// block's bytes, counted each time it is linked, stopping as soon as the
// running total passes the bound. A fetch is bounded as its blocks arrive
// (FetchWithin): by the bytes of the distinct blocks, which is what the
// store pays, and by the depth and the number of entries, so that a DAG
// three thousand folders deep ends within a few round trips of its 64th
// level rather than at the fetch's timeout.

const (
	// MaxFolderDepth bounds how deeply entries (files and folders) nest
	// below a DAG's root: root/a/b/.../file is refused once file is more
	// than this many levels down.
	MaxFolderDepth = 64
	// MaxBlockDepth bounds the blocks on any path from the root: folders,
	// the inner nodes of sharded (HAMT) folders and of files. A balanced
	// file of 64 GiB is 4 blocks deep, and a HAMT at most 8 per folder.
	MaxBlockDepth = 4 * MaxFolderDepth
	// MaxEntries bounds the files and folders of one DAG, an entry linked
	// twice counted twice: each is an inode where it is written out.
	MaxEntries = 1 << 20
	// MaxFetchBlocks bounds the distinct blocks of one bounded fetch: 64
	// GiB of 256 KiB chunks is 262,144, a million small files about
	// twice that, and millions of one-byte blocks a DAG made to take a
	// fetch's time and memory.
	MaxFetchBlocks = 2 << 20
)

// ErrTooDeep is wrapped by a walk that met a DAG deeper than
// MaxFolderDepth folders or MaxBlockDepth blocks.
var ErrTooDeep = errors.New("DAG too deep")

// SizeError is a DAG over a byte bound. It wraps ErrTooLarge.
type SizeError struct {
	Root  cid.Cid
	Limit int64 // the bound
	// Bytes is what was counted when the walk stopped: more than Limit.
	Bytes int64
	// Expanded: Bytes counts a block each time it is linked (what
	// writing the DAG out costs); otherwise it is the bytes of its
	// distinct blocks (what fetching it into the store costs).
	Expanded bool
}

func (e *SizeError) Error() string {
	if e.Expanded {
		return fmt.Sprintf("more than %d bytes once written out (every block counted each time it is linked; %d counted when the walk stopped)",
			e.Limit, e.Bytes)
	}
	return fmt.Sprintf("more than %d bytes of blocks (%d had arrived or were here when the fetch stopped)", e.Limit, e.Bytes)
}

func (e *SizeError) Unwrap() error { return ErrTooLarge }

// DAGSize is what writing a DAG out costs, measured on its blocks.
type DAGSize struct {
	// Bytes is every block's bytes, counted each time it is linked: at
	// least the file data written out, never less whatever a node claims.
	Bytes int64
	// Entries is the files and folders below the root, each counted as
	// often as it is linked.
	Entries int
	// Depth is how many levels below the root the deepest entry is.
	Depth int
}

// Expand measures the DAG under root, whose blocks must all be in bs,
// as Expand describes: it stops with a *SizeError as soon as the bytes
// pass maxBytes, and with an error wrapping ErrTooLarge past MaxEntries
// entries or ErrTooDeep past MaxFolderDepth or MaxBlockDepth. Each
// distinct dag-pb block is read and walked once (one linked many times
// is measured once and counted as often as linked), so the walk's time
// is that of the links of the DAG's distinct blocks, however much they
// describe. Raw leaves are only sized (GetSize), at each link, and not
// remembered: the memory is that of the DAG's inner blocks.
func Expand(ctx context.Context, bs blockstore.Blockstore, root cid.Cid, maxBytes int64) (DAGSize, error) {
	if maxBytes <= 0 {
		return DAGSize{}, fmt.Errorf("expand %s: the bound %d must be positive", root, maxBytes)
	}
	e := &expander{ctx: ctx, bs: bs, root: root, max: min(maxBytes, 1<<62), memo: map[string]subtree{}}
	s, err := e.visit(root, 0, 1)
	if err != nil {
		return DAGSize{}, err
	}
	return DAGSize{Bytes: e.bytes, Entries: e.entries, Depth: s.levels}, nil
}

// subtree is what Expand learnt of one block and all below it.
type subtree struct {
	bytes   int64 // expanded
	entries int   // entries below it (not itself)
	levels  int   // entry levels below it
	height  int   // blocks on its longest path down, itself included
}

type expander struct {
	ctx     context.Context
	bs      blockstore.Blockstore
	root    cid.Cid
	max     int64
	bytes   int64 // the running total, every block counted each time it is reached
	entries int
	visits  int
	memo    map[string]subtree // by CID key: the dag-pb blocks measured
}

// add counts n more bytes and k more entries, and stops the walk past
// the bounds.
func (e *expander) add(n int64, k int) error {
	e.bytes += n
	e.entries += k
	if e.bytes > e.max {
		return &SizeError{Root: e.root, Limit: e.max, Bytes: e.bytes, Expanded: true}
	}
	if e.entries > MaxEntries {
		return fmt.Errorf("%w: more than %d entries (files and folders, each counted as often as it is linked)", ErrTooLarge, MaxEntries)
	}
	return nil
}

// tooDeep is the error for a DAG whose entries pass MaxFolderDepth or
// whose blocks pass MaxBlockDepth; at is where the walk noticed.
func tooDeep(at cid.Cid, levels int) error {
	if levels > MaxFolderDepth {
		return fmt.Errorf("%w: folder deeper than %d levels (at block %s)", ErrTooDeep, MaxFolderDepth, at)
	}
	return fmt.Errorf("%w: more than %d blocks deep (at block %s)", ErrTooDeep, MaxBlockDepth, at)
}

// visit measures c, reached at entry level level and block depth depth
// (the root is level 0, depth 1).
func (e *expander) visit(c cid.Cid, level, depth int) (subtree, error) {
	if s, ok := e.memo[c.KeyString()]; ok {
		if level+s.levels > MaxFolderDepth || depth-1+s.height > MaxBlockDepth {
			return s, tooDeep(c, level+s.levels)
		}
		return s, e.add(s.bytes, s.entries)
	}
	if depth > MaxBlockDepth {
		return subtree{}, tooDeep(c, level)
	}
	if e.visits++; e.visits%1024 == 0 {
		if err := e.ctx.Err(); err != nil {
			return subtree{}, err
		}
	}
	startBytes, startEntries := e.bytes, e.entries
	s := subtree{height: 1}
	switch {
	case c.Prefix().MhType == multihash.IDENTITY:
		dec, err := multihash.Decode(c.Hash())
		if err != nil {
			return s, fmt.Errorf("block %s: %w", c, err)
		}
		if c.Type() != cid.Raw {
			return s, fmt.Errorf("block %s: an identity CID of codec %#x; only raw leaves are inlined in a UnixFS DAG", c, c.Type())
		}
		if err := e.add(int64(len(dec.Digest)), 0); err != nil {
			return s, err
		}
	case c.Type() == cid.Raw:
		n, err := e.bs.GetSize(e.ctx, c)
		if err != nil {
			return s, fmt.Errorf("block %s: %w", c, err)
		}
		return s, e.add(int64(n), 0) // a leaf: not remembered (see Expand)
	case c.Type() == cid.DagProtobuf:
		b, err := e.bs.Get(e.ctx, c)
		if err != nil {
			return s, fmt.Errorf("block %s: %w", c, err)
		}
		if err := e.add(int64(len(b.RawData())), 0); err != nil {
			return s, err
		}
		n, err := merkledag.DecodeProtobuf(b.RawData())
		if err != nil {
			return s, fmt.Errorf("block %s: %w", c, err)
		}
		isEntry, err := entryLinks(n)
		if err != nil {
			return s, fmt.Errorf("block %s: %w", c, err)
		}
		for _, l := range n.Links() {
			childLevel, step := level, 0
			if isEntry(l.Name) {
				step = 1
				childLevel++
				if err := e.add(0, 1); err != nil {
					return s, err
				}
				if childLevel > MaxFolderDepth {
					return s, tooDeep(l.Cid, childLevel)
				}
			}
			cs, err := e.visit(l.Cid, childLevel, depth+1)
			if err != nil {
				return s, err
			}
			s.levels = max(s.levels, cs.levels+step)
			s.height = max(s.height, cs.height+1)
		}
	default:
		return s, fmt.Errorf("block %s: codec %#x is not dag-pb or raw, the codecs of a UnixFS DAG", c, c.Type())
	}
	s.bytes, s.entries = e.bytes-startBytes, e.entries-startEntries
	e.memo[c.KeyString()] = s
	return s, nil
}

// entryLinks says which of a dag-pb node's links are entries of a folder
// (a level down) rather than the inner blocks of the same file or
// folder: every link of a directory; those of a HAMT shard whose name is
// longer than the shard's index prefix (the others are inner shards);
// none of a file's.
func entryLinks(n *merkledag.ProtoNode) (func(name string) bool, error) {
	fsn, err := unixfs.FSNodeFromBytes(n.Data())
	if err != nil {
		return nil, fmt.Errorf("not a UnixFS node: %w", err)
	}
	switch fsn.Type() {
	case unixfs.TDirectory:
		return func(string) bool { return true }, nil
	case unixfs.THAMTShard:
		pad := len(fmt.Sprintf("%X", fsn.Fanout()-1)) // boxo's hamt: the index prefix of every link name
		return func(name string) bool { return len(name) > pad }, nil
	}
	return func(string) bool { return false }, nil
}

// walkBound is a bounded fetch's watch over the DAG as its blocks arrive
// (see FetchWithin): every block's entry level and block depth as first
// linked, and the entries met. The fetch walks each distinct block once,
// so what it sees is the DAG's shape by its shortest paths; Expand, run
// on the whole DAG once it is here, checks the longest.
type walkBound struct {
	at        map[string]walkPos
	entries   int
	maxBytes  int64 // the DAG's bytes, those already here counted
	maxBlocks int   // and its blocks
}

type walkPos struct{ level, depth int }

type walkBoundKey struct{}

// boundOf is the walkBound FetchWithin put in ctx; nil for a plain Fetch.
func boundOf(ctx context.Context) *walkBound {
	w, _ := ctx.Value(walkBoundKey{}).(*walkBound)
	return w
}

// linked checks the links of block c (decoded as n) against the bounds,
// and notes where each child first appeared. Nil-safe: a plain Fetch has
// no bound.
func (w *walkBound) linked(c cid.Cid, n *merkledag.ProtoNode) error {
	if w == nil {
		return nil
	}
	p, ok := w.at[c.KeyString()]
	if !ok {
		p = walkPos{0, 1} // the root, or a block reached before its parent was read
	}
	isEntry, err := entryLinks(n)
	if err != nil {
		return fmt.Errorf("block %s: %w", c, err)
	}
	for _, l := range n.Links() {
		q := walkPos{p.level, p.depth + 1}
		if isEntry(l.Name) {
			q.level++
			if w.entries++; w.entries > MaxEntries {
				return fmt.Errorf("%w: more than %d entries", ErrTooLarge, MaxEntries)
			}
		}
		if q.level > MaxFolderDepth || q.depth > MaxBlockDepth {
			return tooDeep(l.Cid, q.level)
		}
		if l.Cid.Type() == cid.Raw {
			continue // a leaf links nothing: its place is not needed
		}
		if _, seen := w.at[l.Cid.KeyString()]; !seen {
			w.at[l.Cid.KeyString()] = q
		}
	}
	return nil
}

// FetchLimits bound one fetch of a DAG that someone else named.
type FetchLimits struct {
	// MaxBytes bounds the bytes of the DAG's distinct blocks, those
	// fetched and those found in the store: the fetch stops with a
	// *SizeError once they pass it (checked after each store write, so
	// at most one write of putBatch blocks over). > 0.
	MaxBytes int64
	// MaxBlocks bounds its distinct blocks; 0 is MaxFetchBlocks.
	MaxBlocks int
}

// FetchWithin is FetchFrom (sources, when given, the peers that hold it)
// bounded by lim, MaxFolderDepth, MaxBlockDepth and MaxEntries as the
// blocks arrive: it fails, with nothing pinned, once the DAG passes one
// of them. The blocks fetched until then stay in the store until a GC.
// It checks what fetching costs; what writing the DAG out costs is
// Expand's to check once it is here.
func (x *Exchange) FetchWithin(ctx context.Context, root cid.Cid, sources []peer.ID, lim FetchLimits, progress func(FetchProgress)) (FetchResult, error) {
	if lim.MaxBytes <= 0 {
		return FetchResult{}, fmt.Errorf("fetch %s: the bound %d must be positive", root, lim.MaxBytes)
	}
	if lim.MaxBlocks <= 0 {
		lim.MaxBlocks = MaxFetchBlocks
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	ctx = context.WithValue(ctx, walkBoundKey{}, &walkBound{at: map[string]walkPos{}, maxBytes: lim.MaxBytes, maxBlocks: lim.MaxBlocks})
	res, err := x.FetchFrom(ctx, root, sources, func(p FetchProgress) {
		switch {
		case p.Bytes > lim.MaxBytes:
			stop(&SizeError{Root: root, Limit: lim.MaxBytes, Bytes: p.Bytes})
		case p.Blocks > lim.MaxBlocks:
			stop(fmt.Errorf("%w: more than %d blocks", ErrTooLarge, lim.MaxBlocks))
		}
		if progress != nil {
			progress(p)
		}
	})
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrTooLarge) {
			return res, fmt.Errorf("fetch %s: %w", root, cause)
		}
		return res, err
	}
	return res, nil
}

// walked is the last check of a bounded walk, before its root is pinned:
// the bytes and blocks walked, fetched or already here, are within the
// bounds. The
// progress check alone cannot stop a walk whose last blocks were all
// here (no write, so no progress), nor one that ended in the same
// batch that crossed the bound; either would pin a root over it.
// Nil-safe.
func (w *walkBound) walked(root cid.Cid, bytes int64, blocks int) error {
	switch {
	case w == nil:
		return nil
	case bytes > w.maxBytes:
		return &SizeError{Root: root, Limit: w.maxBytes, Bytes: bytes}
	case blocks > w.maxBlocks:
		return fmt.Errorf("%w: more than %d blocks", ErrTooLarge, w.maxBlocks)
	}
	return nil
}

// OutputLimits are the bounds on a job's outputs whose spec says
// max_size maxSize. files bounds their file data: the provider's output
// volume, which is max_size rounded up to a whole MiB (its tmpfs's
// size). blocks bounds the bytes of their DAG's distinct blocks, what a
// renter's fetch stores: files and an eighth more, and 1 MiB, for the
// folders and the files' index nodes (a few hundred bytes per entry, a
// few hundredths of a percent of a large file).
func OutputLimits(maxSize int64) (files, blocks int64) {
	files = (max(maxSize, 1) + 1<<20 - 1) &^ (1<<20 - 1)
	return files, files + files/8 + 1<<20
}
