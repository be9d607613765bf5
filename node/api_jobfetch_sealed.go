package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// fetchOutputs fetches a job's outputs from sources (its provider) and
// writes them at p.Dir. Sealed outputs (every provider since outputs are
// sealed) are opened with this node's identity key as they stream from
// the store to the files: the plaintext is written nowhere else. Outputs
// a provider kept in the clear before (a directory) are written as they
// are, with a note.
func (n *Node) fetchOutputs(ctx context.Context, outputs string, p JobFetchParams, sources []peer.ID) (DataFetchResult, error) {
	if _, err := os.Lstat(p.Dir); err == nil {
		return DataFetchResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: fmt.Sprintf("dir %s exists already; give a new name (fetch never overwrites)", p.Dir)}
	}
	if st, err := os.Stat(filepath.Dir(p.Dir)); err != nil || !st.IsDir() {
		return DataFetchResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: fmt.Sprintf("dir %s: its parent is not a directory", p.Dir)}
	}
	c, err := cid.Decode(outputs)
	if err != nil {
		return DataFetchResult{}, fmt.Errorf("the job's outputs CID %q: %w", outputs, err)
	}
	timeout := DataCIDParams{TimeoutS: p.TimeoutS}.timeout()
	res, err := n.fetchData(ctx, c, timeout, false, sources...)
	if err != nil {
		return res, err
	}
	lim := data.ExportLimits{MaxBytes: n.data.Quota(), MaxEntries: maxInputEntries}
	sealed, err := data.IsSealed(ctx, n.data.DAG(), c)
	if err != nil {
		return res, err
	}
	if !sealed {
		n.log.Warn("job outputs were kept in the clear by a provider from before sealing", "cid", c)
		if err := data.Export(ctx, n.data.DAG(), c, p.Dir, lim); err != nil {
			return res, dataError(err)
		}
		res.Path = p.Dir
		return res, nil
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
	tr, err := data.ExtractTar(ctx, pt, p.Dir, lim)
	if err != nil {
		return res, &rpc.Error{Code: CodeDataRefused, Message: fmt.Sprintf("open the sealed outputs %s: %v (what was written under %s is incomplete)", c, err, p.Dir)}
	}
	res.Path, res.Sealed, res.Files = p.Dir, true, tr.Files
	return res, nil
}
