package renting

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/ipfs/go-cid"
)

// An array's split (array.split) deals one input's files over its
// shards. The node's data store does the dealing and building
// (InputSplitter, node/node_split.go) once, when the array is submitted
// and before anything is bought; the shards' directories are kept in the
// array's record, so a restarted node gives each shard the same files
// without dealing again, and each shard's spec names its own directory
// in that input's place.

// InputSplitter deals the files of an input over an array's shards.
type InputSplitter interface {
	// SplitInput builds, for each of shards shards, a directory of its
	// files out of the directory DAG root, held here and pinned, and
	// returns them in shard order. Errors the renter fixes in the spec
	// or the input (too few files, not a directory, not held here) wrap
	// ErrSplitRefused.
	SplitInput(ctx context.Context, root cid.Cid, shards int) ([]ShardInput, error)
}

// ShardInput is one shard's part of a split input.
type ShardInput struct {
	CID   string `json:"cid"`   // the directory of its files
	Files int    `json:"files"` // how many
	Bytes uint64 `json:"bytes"` // their data
}

// ErrSplitRefused is wrapped by a split that the renter's spec or input
// makes impossible.
var ErrSplitRefused = errors.New("cannot be split")

// splitTimeout bounds the dealing: it reads this node's own store only.
const splitTimeout = 5 * time.Minute

// splitInput deals spec's split input over its shards, or says why not
// in words that name array.split.
func (r *Jobs) splitInput(spec *auction.JobSpec) ([]ShardInput, error) {
	k := spec.SplitInput()
	if k < 0 {
		return nil, nil
	}
	in := spec.Inputs[k]
	field := fmt.Sprintf("array.split: input %s", in.Path)
	if r.split == nil {
		return nil, fmt.Errorf("%s: this node has no data store to split it with", field)
	}
	root, err := cid.Decode(in.CID)
	if err != nil {
		// A src input is imported at submit (job_submit): one still
		// naming a path here never reached it.
		return nil, fmt.Errorf("%w: %s: not imported yet: submit through job_submit, which imports src inputs", auction.ErrBadJobSpec, field)
	}
	ctx, cancel := context.WithTimeout(r.bg, splitTimeout)
	defer cancel()
	parts, err := r.split.SplitInput(ctx, root, spec.Array.Shards)
	switch {
	case errors.Is(err, ErrSplitRefused):
		return nil, fmt.Errorf("%w: %s: %v", auction.ErrBadJobSpec, field, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", field, err)
	case len(parts) != spec.Array.Shards:
		return nil, fmt.Errorf("%s: dealt over %d shards, not %d", field, len(parts), spec.Array.Shards)
	}
	return parts, nil
}

// shardSpec is shard i's spec: the array's with shard written in and,
// when the array splits an input, the shard's own directory in its place.
func (run *arrayRun) shardSpec(i int) (*auction.JobSpec, error) {
	ss, err := run.spec.ShardSpec(i)
	if err != nil {
		return nil, err
	}
	k := run.spec.SplitInput()
	if k < 0 {
		return ss, nil
	}
	if i >= len(run.rec.Split) {
		return nil, fmt.Errorf("array %s splits %s but its record holds no directory for shard %d", run.rec.ID, run.spec.Inputs[k].Path, i)
	}
	ss.Inputs = append([]auction.Input(nil), run.spec.Inputs...)
	ss.Inputs[k].CID = run.rec.Split[i].CID
	return ss, nil
}
