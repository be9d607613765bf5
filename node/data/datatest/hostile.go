// Package datatest builds the hostile DAGs of issue 34 for tests: DAGs
// that are small to fetch and huge, deep or wide to write out. Every node
// is well-formed UnixFS (CIDv1, dag-pb folders, raw leaves), as `ipfs add`
// could never write them but a hostile renter or provider can.
package datatest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// Adder is where the blocks go: a DAG service, or an ipld.Batch of one
// (a deep DAG is thousands of blocks, one synced store write each
// without a batch).
type Adder interface {
	Add(ctx context.Context, n ipld.Node) error
}

// Leaf adds a raw leaf of size bytes (derived from seed) to dag.
func Leaf(ctx context.Context, dag Adder, seed uint64, size int) (ipld.Node, error) {
	b := make([]byte, size)
	var ctr [16]byte
	binary.BigEndian.PutUint64(ctr[:8], seed)
	for off := 0; off < size; off += sha256.Size {
		binary.BigEndian.PutUint64(ctr[8:], uint64(off))
		sum := sha256.Sum256(ctr[:])
		copy(b[off:], sum[:])
	}
	n := merkledag.NewRawNode(b) // CIDv1, raw, sha2-256
	return n, dag.Add(ctx, n)
}

// Folder adds a plain UnixFS folder whose entries are names[i] ->
// children[i] (names must differ) and returns it.
func Folder(ctx context.Context, dag Adder, names []string, children []ipld.Node) (ipld.Node, error) {
	n := unixfs.EmptyDirNode()
	n.SetCidBuilder(merkledag.V1CidPrefix())
	for i, c := range children {
		if err := n.AddNodeLink(names[i], c); err != nil {
			return nil, err
		}
	}
	return n, dag.Add(ctx, n)
}

// RepeatedFolder is the input bomb: a folder of entries entries, "f0",
// "f1", ..., every one of them the same raw leaf of leafBytes bytes. It
// is one leaf and one folder block to fetch, and entries*leafBytes to
// write out; its links claim as much (each link's Tsize is the leaf's).
func RepeatedFolder(ctx context.Context, dag Adder, seed uint64, entries, leafBytes int) (cid.Cid, error) {
	leaf, err := Leaf(ctx, dag, seed, leafBytes)
	if err != nil {
		return cid.Undef, err
	}
	names := make([]string, entries)
	children := make([]ipld.Node, entries)
	for i := range names {
		names[i], children[i] = fmt.Sprintf("f%d", i), leaf
	}
	n, err := Folder(ctx, dag, names, children)
	if err != nil {
		return cid.Undef, err
	}
	return n.Cid(), nil
}

// WideFolder is the entry bomb: a folder of outer entries, every one the
// same folder of inner small files, outer*(inner+1) entries to write out
// from a handful of blocks.
func WideFolder(ctx context.Context, dag Adder, outer, inner int) (cid.Cid, error) {
	leaf, err := Leaf(ctx, dag, 1, 1)
	if err != nil {
		return cid.Undef, err
	}
	names := make([]string, inner)
	children := make([]ipld.Node, inner)
	for i := range names {
		names[i], children[i] = fmt.Sprintf("f%d", i), leaf
	}
	in, err := Folder(ctx, dag, names, children)
	if err != nil {
		return cid.Undef, err
	}
	names = make([]string, outer)
	children = make([]ipld.Node, outer)
	for i := range names {
		names[i], children[i] = fmt.Sprintf("d%d", i), in
	}
	n, err := Folder(ctx, dag, names, children)
	if err != nil {
		return cid.Undef, err
	}
	return n.Cid(), nil
}

// DeepFolder is a chain of depth folders, each holding only the next
// ("d"), the last a small file ("f"): one block per level, so a fetch of
// it takes a round trip per level.
func DeepFolder(ctx context.Context, dag Adder, depth int) (cid.Cid, error) {
	n, err := Leaf(ctx, dag, 2, 16)
	if err != nil {
		return cid.Undef, err
	}
	name := "f"
	for range depth {
		if n, err = Folder(ctx, dag, []string{name}, []ipld.Node{n}); err != nil {
			return cid.Undef, err
		}
		name = "d"
	}
	return n.Cid(), nil
}
