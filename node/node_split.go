package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// MaxSplitEntries bounds the files and directories of an input that an
// array's split deals: the listing is held in memory while the shards'
// directories are built.
const MaxSplitEntries = 200_000

// nodeSplit deals an array's input (array.split) over its shards out of
// this node's store: the listing of the input's files, the dealing
// (renter.DealFiles) and one directory per shard that links the files'
// blocks where they are (data.Store.AddSubset).
type nodeSplit struct{ n *Node }

func (s nodeSplit) SplitInput(ctx context.Context, root cid.Cid, shards int) ([]renting.ShardInput, error) {
	st := s.n.data
	files, err := st.ListFiles(ctx, root, MaxSplitEntries)
	switch {
	case errors.Is(err, data.ErrNotDir):
		return nil, fmt.Errorf("%w: %s is a single file; split deals the files of a directory", renting.ErrSplitRefused, root)
	case errors.Is(err, data.ErrTooLarge), errors.Is(err, data.ErrUnsafePath):
		return nil, fmt.Errorf("%w: %v", renting.ErrSplitRefused, err)
	case ipld.IsNotFound(err):
		return nil, fmt.Errorf("%w: %s is not all in this node's store: give the input as src, or `gleaner data pin` its CID first (%v)", renting.ErrSplitRefused, root, err)
	case err != nil:
		return nil, err
	}
	sizes := make([]uint64, len(files))
	for i, f := range files {
		sizes[i] = f.Size
	}
	deal, err := renter.DealFiles(sizes, shards)
	if errors.Is(err, renter.ErrTooFewFiles) {
		return nil, fmt.Errorf("%w: it holds %d files, fewer than array.shards (%d): each shard needs one at least", renting.ErrSplitRefused, len(files), shards)
	}
	if err != nil {
		return nil, err
	}
	out := make([]renting.ShardInput, len(deal))
	for i, idx := range deal {
		part := make([]data.DirFile, len(idx))
		for k, f := range idx {
			part[k] = files[f]
			out[i].Bytes += files[f].Size
		}
		c, err := st.AddSubset(ctx, root, part)
		if err != nil {
			return nil, fmt.Errorf("shard %d's directory: %w", i, err)
		}
		out[i].CID, out[i].Files = c.String(), len(part)
	}
	n := 0
	for _, p := range out {
		n += p.Files
	}
	s.n.log.Info("array input split", "input", root, "shards", shards, "files", n)
	return out, nil
}
