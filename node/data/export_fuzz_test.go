package data

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ipfs/boxo/ipld/merkledag"
	mdtest "github.com/ipfs/boxo/ipld/merkledag/test"
	"github.com/ipfs/boxo/ipld/unixfs"
	blocks "github.com/ipfs/go-block-format"
)

// FuzzExportBlock feeds a peer's arbitrary bytes, as the root block of a
// DAG, to Export: it may fail, but must not panic, and must not create
// anything beside its target.
func FuzzExportBlock(f *testing.F) {
	dir := unixfs.EmptyDirNode()
	leaf := merkledag.NodeWithData(unixfs.FilePBData([]byte("x\n"), 2))
	_ = dir.AddNodeLink("..", leaf)
	f.Add(dir.RawData())
	f.Add(leaf.RawData())
	f.Add(unixfs.EmptyDirNode().RawData())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := merkledag.V1CidPrefix().Sum(raw)
		if err != nil {
			t.Fatal(err)
		}
		blk, err := blocks.NewBlockWithCid(raw, c)
		if err != nil {
			t.Fatal(err)
		}
		n, err := merkledag.DecodeProtobufBlock(blk)
		if err != nil {
			return // not dag-pb: refused before Export sees it
		}
		ctx := context.Background()
		dag := mdtest.Mock()
		// The leaf the seeds link to is present, so a hostile name that
		// slips past the checks has something real to write.
		if err := dag.Add(ctx, leaf); err != nil {
			t.Fatal(err)
		}
		if err := dag.Add(ctx, n); err != nil {
			t.Fatal(err)
		}
		parent := t.TempDir()
		_ = Export(ctx, dag, n.Cid(), filepath.Join(parent, "out"), testLimits)
		onlyTarget(t, parent, "out")
	})
}
