package data

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// WriteTar writes the DAG under c to w as a tar stream, the form in which
// a provider fills a job's input volume: a directory DAG's entries at the
// top of the stream, a file DAG as one file named after its CID. Names are
// checked as Export checks them (CheckName) and lim bounds the bytes and
// entries written, so the stream of a hostile DAG neither escapes the
// volume nor grows without end. Entries carry fixed modes and times: the
// tar of a CID is the same bytes wherever it is made.
func WriteTar(ctx context.Context, dag ipld.DAGService, c cid.Cid, w io.Writer, lim ExportLimits) error {
	if lim.MaxBytes <= 0 || lim.MaxEntries <= 0 {
		return fmt.Errorf("tar limits %+v: both must be positive", lim)
	}
	n, err := dag.Get(ctx, c)
	if err != nil {
		return err
	}
	t := &tarExporter{exporter: exporter{dag: dag, lim: lim}, tw: tar.NewWriter(w)}
	if isDir(n) {
		err = t.dirEntries(ctx, n, "")
	} else {
		err = t.file(ctx, n, c.String())
	}
	if err != nil {
		return err
	}
	return t.tw.Close()
}

type tarExporter struct {
	exporter
	tw *tar.Writer
}

// epoch is every entry's time: a tar that depends only on the DAG.
var epoch = time.Unix(0, 0).UTC()

func (t *tarExporter) node(ctx context.Context, n ipld.Node, name string) error {
	if isDir(n) {
		if err := t.entry(name); err != nil {
			return err
		}
		if err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		return t.dirEntries(ctx, n, name)
	}
	return t.file(ctx, n, name)
}

func (t *tarExporter) dirEntries(ctx context.Context, n ipld.Node, prefix string) error {
	dir, err := uio.NewDirectoryFromNode(t.dag, n)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Cid(), err)
	}
	return dir.ForEachLink(ctx, func(link *ipld.Link) error {
		if err := CheckName(link.Name); err != nil {
			return err
		}
		child, err := link.GetNode(ctx, t.dag)
		if err != nil {
			return fmt.Errorf("%s: %w", link.Name, err)
		}
		return t.node(ctx, child, path.Join(prefix, link.Name))
	})
}

func (t *tarExporter) file(ctx context.Context, n ipld.Node, name string) error {
	if err := t.entry(name); err != nil {
		return err
	}
	r, err := uio.NewDagReader(ctx, n, t.dag)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Cid(), err)
	}
	size := int64(r.Size())
	if left := t.lim.MaxBytes - t.bytes; size > left {
		return fmt.Errorf("%w: %s says %d bytes, %d left of %d", ErrTooLarge, name, size, left, t.lim.MaxBytes)
	}
	if err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	// A tar entry is exactly its header's size: the declared size is
	// what is copied, and a DAG holding less is an error, not a short
	// file.
	n64, err := io.CopyN(t.tw, r, size)
	t.bytes += n64
	if err != nil {
		return fmt.Errorf("%s: %d of %d bytes: %w", name, n64, size, err)
	}
	return nil
}

// AddWrapped imports the file or tree at p inside a directory holding
// only it, under its base name (`ipfs add --wrap-with-directory`), and
// pins the wrapper. A job's input volume is a directory, so this is how a
// single file becomes one: ./weights.bin mounted at /in is
// /in/weights.bin.
func (s *Store) AddWrapped(ctx context.Context, p string) (cid.Cid, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return cid.Undef, err
	}
	name := filepath.Base(p)
	if err := CheckName(name); err != nil {
		return cid.Undef, err
	}
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	child, err := importPath(ctx, s.dag, p, st, CIDv1)
	if err != nil {
		return cid.Undef, err
	}
	dir, err := uio.NewDirectory(s.dag, uio.WithCidBuilder(CIDv1.prefix()))
	if err != nil {
		return cid.Undef, err
	}
	if err := dir.AddChild(ctx, name, child); err != nil {
		return cid.Undef, err
	}
	root, err := dir.GetNode()
	if err != nil {
		return cid.Undef, err
	}
	if err := s.dag.Add(ctx, root); err != nil {
		return cid.Undef, err
	}
	return root.Cid(), s.pin(ctx, root.Cid())
}
