package data

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// A job array's split (docs/JOBS.md, "Job arrays") gives each shard a
// directory of its own files out of one input: ListFiles reads the
// input's tree, and AddSubset builds a directory holding some of its
// files at the same paths. The new directory links the files' existing
// blocks, so only its directory nodes are new: a split copies nothing.

// DirFile is one file of a directory DAG.
type DirFile struct {
	Path string  // below the root, "/"-separated, each element checked by CheckName
	Size uint64  // bytes of file data
	CID  cid.Cid // the file's root
}

// ErrNotDir is wrapped by ListFiles when the root is a single file.
var ErrNotDir = errors.New("not a directory")

// maxTreeDepth bounds the directories ListFiles descends: a DAG is a
// graph a peer may have built, and the walk recurses.
const maxTreeDepth = 64

// ListFiles lists the files under the directory DAG root, sorted by
// path, reading this store's blocks only (a block that is not here is an
// error, not a fetch). At most maxEntries files and directories are
// visited, counting a directory linked twice twice, so a hostile DAG
// cannot make the walk or the list unbounded. Anything other than files
// and directories (a symlink) is refused, as Export refuses it.
func (s *Store) ListFiles(ctx context.Context, root cid.Cid, maxEntries int) ([]DirFile, error) {
	n, err := s.dag.Get(ctx, root)
	if err != nil {
		return nil, err
	}
	if !isDir(n) {
		return nil, fmt.Errorf("%s: %w", root, ErrNotDir)
	}
	l := &lister{dag: s.dag, max: maxEntries}
	if err := l.dir(ctx, n, "", 0); err != nil {
		return nil, err
	}
	sort.Slice(l.files, func(i, j int) bool { return l.files[i].Path < l.files[j].Path })
	return l.files, nil
}

type lister struct {
	dag     ipld.DAGService
	max     int
	entries int
	files   []DirFile
}

func (l *lister) dir(ctx context.Context, n ipld.Node, prefix string, depth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("%w: directories nested deeper than %d (at %s)", ErrTooLarge, maxTreeDepth, prefix)
	}
	d, err := uio.NewDirectoryFromNode(l.dag, n)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Cid(), err)
	}
	return d.ForEachLink(ctx, func(link *ipld.Link) error {
		if err := CheckName(link.Name); err != nil {
			return err
		}
		p := path.Join(prefix, link.Name)
		if l.entries++; l.entries > l.max {
			return fmt.Errorf("%w: more than %d files and directories (at %s)", ErrTooLarge, l.max, p)
		}
		child, err := link.GetNode(ctx, l.dag)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if isDir(child) {
			return l.dir(ctx, child, p, depth+1)
		}
		size, err := fileSize(child)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		l.files = append(l.files, DirFile{Path: p, Size: size, CID: child.Cid()})
		return nil
	})
}

// fileSize is the bytes of data a file node stands for: a raw leaf's
// own, or what a UnixFS file node declares.
func fileSize(n ipld.Node) (uint64, error) {
	pn, ok := n.(*merkledag.ProtoNode)
	if !ok {
		return uint64(len(n.RawData())), nil
	}
	fsn, err := unixfs.FSNodeFromBytes(pn.Data())
	if err != nil {
		return 0, err
	}
	switch fsn.Type() {
	case unixfs.TFile, unixfs.TRaw:
		return fsn.FileSize(), nil
	}
	return 0, fmt.Errorf("%w: a %s, not a file or directory", ErrUnsafePath, fsn.Type())
}

// AddSubset builds a directory DAG holding files (as ListFiles gave them
// for a root of the same layout as layoutOf) at their paths, pins it and
// returns its root. Directories are made as Import makes them, so the
// result has the CID that importing just those files would give; only
// the directory nodes are written, the files' blocks being linked where
// they are.
func (s *Store) AddSubset(ctx context.Context, layoutOf cid.Cid, files []DirFile) (cid.Cid, error) {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	t := newSubsetDir()
	for _, f := range files {
		if err := t.add(f); err != nil {
			return cid.Undef, err
		}
	}
	n, err := t.build(ctx, s.dag, layoutOf.Prefix())
	if err != nil {
		return cid.Undef, err
	}
	return n.Cid(), s.pin(ctx, n.Cid())
}

// subsetDir is one directory of a subset being built.
type subsetDir struct {
	dirs  map[string]*subsetDir
	files map[string]cid.Cid
}

func newSubsetDir() *subsetDir {
	return &subsetDir{dirs: map[string]*subsetDir{}, files: map[string]cid.Cid{}}
}

func (d *subsetDir) add(f DirFile) error {
	parts := strings.Split(f.Path, "/")
	for _, p := range parts {
		if err := CheckName(p); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	for _, p := range parts[:len(parts)-1] {
		if _, clash := d.files[p]; clash {
			return fmt.Errorf("%s: %s is a file and a directory", f.Path, p)
		}
		sub := d.dirs[p]
		if sub == nil {
			sub = newSubsetDir()
			d.dirs[p] = sub
		}
		d = sub
	}
	name := parts[len(parts)-1]
	if _, clash := d.dirs[name]; clash {
		return fmt.Errorf("%s: a file and a directory", f.Path)
	}
	if _, dup := d.files[name]; dup {
		return fmt.Errorf("%s: given twice", f.Path)
	}
	d.files[name] = f.CID
	return nil
}

// build writes d's directory nodes, children first, adding entries in
// name order as importDir does.
func (d *subsetDir) build(ctx context.Context, dag ipld.DAGService, prefix cid.Prefix) (ipld.Node, error) {
	dir, err := uio.NewDirectory(dag, uio.WithCidBuilder(prefix))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(d.dirs)+len(d.files))
	for name := range d.dirs {
		names = append(names, name)
	}
	for name := range d.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var child ipld.Node
		if sub := d.dirs[name]; sub != nil {
			child, err = sub.build(ctx, dag, prefix)
		} else {
			child, err = dag.Get(ctx, d.files[name])
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := dir.AddChild(ctx, name, child); err != nil {
			return nil, err
		}
	}
	n, err := dir.GetNode()
	if err != nil {
		return nil, err
	}
	return n, dag.Add(ctx, n)
}
