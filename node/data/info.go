package data

import (
	"context"

	"github.com/ipfs/go-cid"
)

// Size is the DAG under c as it travels: the bytes of every block it
// links, read from the root alone (dag-pb records its children's
// cumulative size; a raw block is its own bytes). It is what a fetch of c
// adds to a store that holds none of it.
func (s *Store) Size(ctx context.Context, c cid.Cid) (int64, error) {
	n, err := s.dag.Get(ctx, c)
	if err != nil {
		return 0, err
	}
	size, err := n.Size()
	return int64(size), err
}

// Pinned says whether c itself is a pinned root (not merely reachable
// from one).
func (s *Store) Pinned(ctx context.Context, c cid.Cid) (bool, error) {
	return s.db.Has(ctx, pinPrefix.ChildString(c.String()))
}
