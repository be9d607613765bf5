package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/ipfs/go-cid"
)

// openOutputs writes a job's fetched outputs c at dir, their DAG held to
// maxBlocks bytes of blocks and their files to files bytes (a too large
// or too deep DAG is data.ErrTooLarge or data.ErrTooDeep, unwrapped, for
// the caller to name the job's limit). Sealed outputs (every provider's
// since outputs are sealed) are opened with this node's identity key as
// they stream from the store to the files: the plaintext is written
// nowhere else. Outputs a provider kept in the clear before (a
// directory) are written as they are, with a note.
func (n *Node) openOutputs(ctx context.Context, c cid.Cid, dir string, res DataFetchResult, maxBlocks, files int64) (DataFetchResult, error) {
	sealed, err := data.IsSealed(ctx, n.data.DAG(), c)
	if err != nil {
		return res, err
	}
	if !sealed {
		n.log.Warn("job outputs were kept in the clear by a provider from before sealing", "cid", c)
		if err := n.writeOut(ctx, c, dir, maxBlocks, files); err != nil {
			if errors.Is(err, data.ErrTooLarge) || errors.Is(err, data.ErrTooDeep) {
				return res, err
			}
			return res, dataError(err)
		}
		res.Path = dir
		return res, nil
	}
	if _, err := n.data.Expand(ctx, c, maxBlocks); err != nil {
		return res, err
	}
	key, err := n.repo.Identity()
	if err != nil {
		return res, err
	}
	id, err := data.KeyIdentity(key)
	if err != nil {
		return res, err
	}
	pt, err := data.OpenSealed(ctx, n.data.DAG(), c, id)
	if err != nil {
		return res, &rpc.Error{Code: CodeDataRefused, Message: err.Error()}
	}
	tr, err := data.ExtractTar(ctx, pt, dir, data.ExportLimits{MaxBytes: files, MaxEntries: maxInputEntries})
	if err != nil {
		if errors.Is(err, data.ErrTooLarge) || errors.Is(err, data.ErrTooDeep) {
			return res, err
		}
		return res, &rpc.Error{Code: CodeDataRefused, Message: fmt.Sprintf("open the sealed outputs %s: %v (what was written under %s is incomplete)", c, err, dir)}
	}
	res.Path, res.Sealed, res.Files = dir, true, tr.Files
	return res, nil
}
