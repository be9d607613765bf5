package data

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/boxo/ipld/merkledag"
	mdtest "github.com/ipfs/boxo/ipld/merkledag/test"
	"github.com/ipfs/boxo/ipld/unixfs"
	ipld "github.com/ipfs/go-ipld-format"
)

// readTar returns a tar stream's regular files by name, failing on any
// entry a volume must not get.
func readTar(t *testing.T, b []byte) (files map[string][]byte, dirs []string) {
	t.Helper()
	files = map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, dirs
		}
		if err != nil {
			t.Fatal(err)
		}
		if filepath.IsAbs(h.Name) || !filepath.IsLocal(h.Name) {
			t.Fatalf("entry %q escapes the volume", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			dirs = append(dirs, h.Name)
		case tar.TypeReg:
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = body
		default:
			t.Fatalf("entry %q of type %c", h.Name, h.Typeflag)
		}
	}
}

func TestWriteTarOfATree(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src")
	big := []byte(noise(3, 3*ChunkSize+77))
	writeFiles(t, src, map[string]string{"a/b/c.txt": "deep\n", "empty": "", "model.bin": string(big)})
	dag := mdtest.Mock()
	c, err := Import(ctx, dag, src, CIDv1)
	if err != nil {
		t.Fatal(err)
	}
	var one, two bytes.Buffer
	if err := WriteTar(ctx, dag, c, &one, testLimits); err != nil {
		t.Fatal(err)
	}
	files, dirs := readTar(t, one.Bytes())
	if !bytes.Equal(files["model.bin"], big) || string(files["a/b/c.txt"]) != "deep\n" || len(files) != 3 {
		t.Fatalf("tar holds %d files; model.bin %d bytes of %d, c.txt %q", len(files), len(files["model.bin"]), len(big), files["a/b/c.txt"])
	}
	if len(dirs) != 2 {
		t.Errorf("dirs %v, want a/ and a/b/", dirs)
	}
	if err := WriteTar(ctx, dag, c, &two, testLimits); err != nil || !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Errorf("the tar of one CID differs between runs (%v)", err)
	}
	// A file DAG is one entry named after its CID.
	fc, err := Import(ctx, dag, filepath.Join(src, "model.bin"), CIDv1)
	if err != nil {
		t.Fatal(err)
	}
	var fb bytes.Buffer
	if err := WriteTar(ctx, dag, fc, &fb, testLimits); err != nil {
		t.Fatal(err)
	}
	if files, _ := readTar(t, fb.Bytes()); len(files) != 1 || !bytes.Equal(files[fc.String()], big) {
		t.Fatalf("tar of a file DAG: %d entries", len(files))
	}
	// Limits hold.
	if err := WriteTar(ctx, dag, c, io.Discard, ExportLimits{MaxBytes: ChunkSize, MaxEntries: 100}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("tar past MaxBytes: %v, want ErrTooLarge", err)
	}
}

func TestWriteTarRefusesEscapingNames(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"..", "a/../../x", "/etc/passwd", ""} {
		dag := mdtest.Mock()
		leaf := merkledag.NodeWithData(unixfs.FilePBData([]byte("pwned\n"), 6))
		dir := unixfs.EmptyDirNode()
		if err := dir.AddNodeLink(name, leaf); err != nil {
			t.Fatal(err)
		}
		if err := dag.AddMany(ctx, []ipld.Node{leaf, dir}); err != nil {
			t.Fatal(err)
		}
		if err := WriteTar(ctx, dag, dir.Cid(), io.Discard, testLimits); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("tar of an entry named %q: %v, want ErrUnsafePath", name, err)
		}
	}
}

func TestAddWrappedNamesTheFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "weights.bin")
	if err := os.WriteFile(p, []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, filepath.Join(dir, "store"), 1<<30)
	c, err := st.AddWrapped(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTar(ctx, st.DAG(), c, &b, testLimits); err != nil {
		t.Fatal(err)
	}
	if files, _ := readTar(t, b.Bytes()); string(files["weights.bin"]) != "w" || len(files) != 1 {
		t.Fatalf("wrapped file: %v", files)
	}
	if ok, err := st.Pinned(ctx, c); err != nil || !ok {
		t.Errorf("the wrapper is not pinned (%v)", err)
	}
}
