// Package data moves a job's files: it imports a directory or file as a
// UnixFS DAG, the layout `ipfs add` writes, so that the same files give the
// same CID here as there, and exports such a DAG back to files without ever
// writing outside the target directory.
//
// Store keeps blocks and pins on disk. This is the first part of issue 14
// (inputs and outputs by CID); the bitswap exchange and the job wiring
// come next (see docs/DATA.md).
package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	chunker "github.com/ipfs/boxo/chunker"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// ChunkSize is `ipfs add`'s default chunker (size-262144): the CID of a
// file depends on it, so it is fixed rather than a setting.
const ChunkSize = 256 << 10

// Layout names the two `ipfs add` defaults a CID can be checked against.
type Layout int

const (
	// CIDv1 is `ipfs add --cid-version=1`: CIDv1 dag-pb nodes and raw
	// leaves, the "bafy..." CIDs gleaner writes.
	CIDv1 Layout = iota
	// CIDv0 is plain `ipfs add`: "Qm..." CIDs, leaves wrapped in dag-pb.
	CIDv0
)

func (l Layout) prefix() cid.Prefix {
	if l == CIDv0 {
		return merkledag.V0CidPrefix()
	}
	return merkledag.V1CidPrefix()
}

// ErrUnsafePath is wrapped by every error about a name that would leave
// the target directory or cannot be represented: "..", an absolute path, a
// separator inside a link name, a symlink or a device.
var ErrUnsafePath = errors.New("unsafe path")

// Import adds the file or directory at root to dag and returns the CID of
// its root node. A directory's entries are added in name order, as `ipfs
// add -r` does; symlinks and special files are refused rather than
// followed, because a job's inputs and outputs are plain files and a link
// could point outside them.
func Import(ctx context.Context, dag ipld.DAGService, root string, l Layout) (cid.Cid, error) {
	st, err := os.Lstat(root)
	if err != nil {
		return cid.Undef, err
	}
	n, err := importPath(ctx, dag, root, st, l)
	if err != nil {
		return cid.Undef, err
	}
	return n.Cid(), nil
}

func importPath(ctx context.Context, dag ipld.DAGService, p string, st fs.FileInfo, l Layout) (ipld.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case st.Mode().IsRegular():
		return importFile(dag, p, l)
	case st.IsDir():
		return importDir(ctx, dag, p, l)
	default:
		return nil, fmt.Errorf("%w: %s is a %s, not a file or directory", ErrUnsafePath, p, st.Mode().Type())
	}
}

func importFile(dag ipld.DAGService, p string, l Layout) (ipld.Node, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return importReader(dag, f, l)
}

// importReader chunks r into a balanced DAG, reading ChunkSize bytes at a
// time, so memory stays bounded whatever the size.
func importReader(dag ipld.DAGService, r io.Reader, l Layout) (ipld.Node, error) {
	params := helpers.DagBuilderParams{
		Maxlinks:   helpers.DefaultLinksPerBlock,
		RawLeaves:  l == CIDv1,
		CidBuilder: l.prefix(),
		Dagserv:    dag,
	}
	db, err := params.New(chunker.NewSizeSplitter(r, ChunkSize))
	if err != nil {
		return nil, err
	}
	return balanced.Layout(db)
}

func importDir(ctx context.Context, dag ipld.DAGService, p string, l Layout) (ipld.Node, error) {
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	dir, err := uio.NewDirectory(dag, uio.WithCidBuilder(l.prefix()))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		st, err := e.Info()
		if err != nil {
			return nil, err
		}
		child, err := importPath(ctx, dag, filepath.Join(p, e.Name()), st, l)
		if err != nil {
			return nil, err
		}
		if err := dir.AddChild(ctx, e.Name(), child); err != nil {
			return nil, err
		}
	}
	n, err := dir.GetNode()
	if err != nil {
		return nil, err
	}
	return n, dag.Add(ctx, n)
}

// ExportLimits bound what one Export may write. A DAG is a graph, not a
// tree: a few hostile blocks whose links all name the same 256 KiB leaf
// describe terabytes, so the limits count what is written, not what is
// fetched.
type ExportLimits struct {
	MaxBytes   int64 // file data written, in all
	MaxEntries int   // files and directories created, in all
}

// ErrTooLarge is wrapped by an Export that would pass its limits.
var ErrTooLarge = errors.New("DAG exceeds the export limits")

// Export writes the DAG under c to dst: a file DAG becomes the file dst, a
// directory DAG the directory dst. Every link name is checked before
// anything is written under it, so a DAG built by a hostile peer cannot
// write outside dst, and lim bounds the bytes and entries written.
func Export(ctx context.Context, dag ipld.DAGService, c cid.Cid, dst string, lim ExportLimits) error {
	if lim.MaxBytes <= 0 || lim.MaxEntries <= 0 {
		return fmt.Errorf("export limits %+v: both must be positive", lim)
	}
	n, err := dag.Get(ctx, c)
	if err != nil {
		return err
	}
	e := &exporter{dag: dag, lim: lim}
	return e.node(ctx, n, dst)
}

type exporter struct {
	dag     ipld.DAGService
	lim     ExportLimits
	bytes   int64
	entries int
}

func (e *exporter) entry(dst string) error {
	e.entries++
	if e.entries > e.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries (at %s)", ErrTooLarge, e.lim.MaxEntries, dst)
	}
	return nil
}

func (e *exporter) node(ctx context.Context, n ipld.Node, dst string) error {
	if err := e.entry(dst); err != nil {
		return err
	}
	if isDir(n) {
		return e.dir(ctx, n, dst)
	}
	r, err := uio.NewDagReader(ctx, n, e.dag)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Cid(), err)
	}
	if int64(r.Size()) > e.lim.MaxBytes-e.bytes {
		return fmt.Errorf("%w: %s says %d bytes, %d left of %d", ErrTooLarge, dst, r.Size(), e.lim.MaxBytes-e.bytes, e.lim.MaxBytes)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	// The declared size is checked above; the copy is bounded too, in case
	// the blocks hold more than the root declares.
	left := e.lim.MaxBytes - e.bytes
	n64, err := io.Copy(f, io.LimitReader(r, left+1))
	e.bytes += n64
	if err == nil && n64 > left {
		err = fmt.Errorf("%w: %s holds more than the %d bytes left", ErrTooLarge, dst, left)
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func isDir(n ipld.Node) bool {
	pn, ok := n.(*merkledag.ProtoNode)
	if !ok {
		return false // a raw leaf is file data
	}
	fsn, err := unixfs.FSNodeFromBytes(pn.Data())
	if err != nil {
		return false
	}
	t := fsn.Type()
	return t == unixfs.TDirectory || t == unixfs.THAMTShard
}

func (e *exporter) dir(ctx context.Context, n ipld.Node, dst string) error {
	dir, err := uio.NewDirectoryFromNode(e.dag, n)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Cid(), err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	return dir.ForEachLink(ctx, func(link *ipld.Link) error {
		if err := CheckName(link.Name); err != nil {
			return err
		}
		child, err := link.GetNode(ctx, e.dag)
		if err != nil {
			return fmt.Errorf("%s: %w", link.Name, err)
		}
		return e.node(ctx, child, filepath.Join(dst, link.Name))
	})
}

// CheckName accepts a single path element: not empty, not "." or "..",
// without a separator or NUL.
func CheckName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("%w: entry name %q", ErrUnsafePath, name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("%w: entry name %q holds a separator", ErrUnsafePath, name)
	}
	return nil
}
