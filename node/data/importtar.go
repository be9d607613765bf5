package data

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// TarResult says what AddTar imported.
type TarResult struct {
	Root  cid.Cid
	Files int
	Bytes int64 // file data
	// Skipped names the entries that are neither files nor directories
	// (symlinks, devices): a job's results are its files, and a link
	// could name anything on the machine that exports it later.
	Skipped []string
}

// maxSkippedNames bounds TarResult.Skipped.
const maxSkippedNames = 16

// AddTar imports a tar stream of a directory (what a provider copies out
// of a job's output volume) as a UnixFS directory and pins it. The CID is
// the one Import gives for the same tree unpacked, so a renter can check
// its results against a local copy. Entry names are checked as Export
// checks them (no "..", no absolute names); lim bounds the file bytes and
// entries read. GC is held off until the pin.
func (s *Store) AddTar(ctx context.Context, r io.Reader, lim ExportLimits) (TarResult, error) {
	return s.addTar(ctx, r, lim, s.pin)
}

// addTar imports r and pins its root with pin, GC held off in between.
func (s *Store) addTar(ctx context.Context, r io.Reader, lim ExportLimits, pin func(context.Context, cid.Cid) error) (TarResult, error) {
	if lim.MaxBytes <= 0 || lim.MaxEntries <= 0 {
		return TarResult{}, fmt.Errorf("tar limits %+v: both must be positive", lim)
	}
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	res, err := importTar(ctx, s.dag, r, lim)
	if err != nil {
		return res, err
	}
	return res, pin(ctx, res.Root)
}

// tarDir is a directory being assembled from tar entries, which may come
// in any order.
type tarDir struct {
	dirs  map[string]*tarDir
	files map[string]ipld.Node
}

func newTarDir() *tarDir { return &tarDir{dirs: map[string]*tarDir{}, files: map[string]ipld.Node{}} }

func importTar(ctx context.Context, dag ipld.DAGService, r io.Reader, lim ExportLimits) (TarResult, error) {
	var res TarResult
	root := newTarDir()
	tr := tar.NewReader(r)
	for entries := 0; ; entries++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("read the tar: %w", err)
		}
		if entries >= lim.MaxEntries {
			return res, fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.MaxEntries)
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		name, err := tarName(h.Name)
		if err != nil {
			return res, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if name != "" {
				if _, err := root.dir(name); err != nil {
					return res, err
				}
			}
		case tar.TypeReg:
			if name == "" {
				return res, fmt.Errorf("%w: a file entry named %q", ErrUnsafePath, h.Name)
			}
			if h.Size > lim.MaxBytes-res.Bytes {
				return res, fmt.Errorf("%w: %s is %d bytes, %d left of %d", ErrTooLarge, name, h.Size, lim.MaxBytes-res.Bytes, lim.MaxBytes)
			}
			parent, err := root.dir(path.Dir(name))
			if err != nil {
				return res, err
			}
			base := path.Base(name)
			if _, isDir := parent.dirs[base]; isDir {
				return res, fmt.Errorf("%w: %s is both a directory and a file", ErrUnsafePath, name)
			}
			n, err := importReader(dag, io.LimitReader(tr, h.Size), CIDv1)
			if err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			parent.files[base] = n // a later entry of one name replaces the earlier, as tar does
			res.Files++
			res.Bytes += h.Size
		default:
			if len(res.Skipped) < maxSkippedNames {
				res.Skipped = append(res.Skipped, name)
			}
		}
	}
	n, err := root.build(ctx, dag)
	if err != nil {
		return res, err
	}
	res.Root = n.Cid()
	return res, nil
}

// tarName is an entry's name relative to the tree's root, "" for the
// root itself; "./a/b" and "a/b/" are "a/b".
func tarName(raw string) (string, error) {
	name := strings.TrimSuffix(strings.TrimPrefix(raw, "./"), "/")
	if name == "." || name == "" {
		return "", nil
	}
	if path.IsAbs(name) || path.Clean(name) != name {
		return "", fmt.Errorf("%w: tar entry %q", ErrUnsafePath, raw)
	}
	for _, el := range strings.Split(name, "/") {
		if err := CheckName(el); err != nil {
			return "", err
		}
	}
	return name, nil
}

// dir returns the directory at rel (slash-separated, "." for d itself),
// making what is missing.
func (d *tarDir) dir(rel string) (*tarDir, error) {
	if rel == "." || rel == "" {
		return d, nil
	}
	cur := d
	for _, el := range strings.Split(rel, "/") {
		if _, isFile := cur.files[el]; isFile {
			return nil, fmt.Errorf("%w: %s is both a file and a directory", ErrUnsafePath, rel)
		}
		next := cur.dirs[el]
		if next == nil {
			next = newTarDir()
			cur.dirs[el] = next
		}
		cur = next
	}
	return cur, nil
}

// build writes the directory's blocks, children first and entries in
// name order as importDir adds them.
func (d *tarDir) build(ctx context.Context, dag ipld.DAGService) (ipld.Node, error) {
	names := make([]string, 0, len(d.dirs)+len(d.files))
	for n := range d.dirs {
		names = append(names, n)
	}
	for n := range d.files {
		names = append(names, n)
	}
	sort.Strings(names)
	dir, err := uio.NewDirectory(dag, uio.WithCidBuilder(CIDv1.prefix()))
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		child, ok := d.files[name]
		if !ok {
			if child, err = d.dirs[name].build(ctx, dag); err != nil {
				return nil, err
			}
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
