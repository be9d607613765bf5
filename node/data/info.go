package data

import (
	"context"

	"github.com/ipfs/go-cid"
)

// Size is the DAG under c as its root claims it: the bytes of every block
// it links, read from the root alone (dag-pb records its children's
// cumulative size; a raw block is its own bytes). It is what a listing
// shows (data ls) and never a bound: a hostile root claims what it likes,
// and a block linked twice is claimed twice or not at all. What writing
// the DAG out costs is Expand's to measure.
func (s *Store) Size(ctx context.Context, c cid.Cid) (int64, error) {
	n, err := s.dag.Get(ctx, c)
	if err != nil {
		return 0, err
	}
	size, err := n.Size()
	return int64(size), err
}

// Expand measures what writing the DAG under c out costs, on its blocks
// in this store, stopping past maxBytes (see the function Expand).
func (s *Store) Expand(ctx context.Context, c cid.Cid, maxBytes int64) (DAGSize, error) {
	return Expand(ctx, s.Blockstore(), c, maxBytes)
}

// Pinned says whether c itself is a pinned root (not merely reachable
// from one).
func (s *Store) Pinned(ctx context.Context, c cid.Cid) (bool, error) {
	return s.db.Has(ctx, pinPrefix.ChildString(c.String()))
}
