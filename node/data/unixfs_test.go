package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/boxo/ipld/merkledag"
	mdtest "github.com/ipfs/boxo/ipld/merkledag/test"
	"github.com/ipfs/boxo/ipld/unixfs"
)

// The reference CIDs below are those kubo's own test suite expects from
// `ipfs add` (test/sharness/t0040-add-and-cat.sh) for the same bytes.
func TestImportMatchesIPFSAdd(t *testing.T) {
	planets := t.TempDir() + "/planets"
	writeFiles(t, planets, map[string]string{"mars.txt": "Hello Mars!\n", "venus.txt": "Hello Venus!\n"})
	moons := t.TempDir() + "/moons"
	writeFiles(t, moons, map[string]string{
		"jupiter/europa.txt": "Hello Europa!\n",
		"saturn/titan.txt":   "Hello Titan!\n",
		"mercury.txt":        "hey youre no moon!\n",
	})
	hello := filepath.Join(t.TempDir(), "hello.txt")
	writeFiles(t, filepath.Dir(hello), map[string]string{"hello.txt": "Hello Worlds!\n"})

	for _, tc := range []struct {
		name, path string
		layout     Layout
		want       string
	}{
		{"file v0", hello, CIDv0, "QmVr26fY1tKyspEJBniVhqxQeEjhF78XerGiqWAwraVLQH"},
		{"file in dir v0", planets + "/mars.txt", CIDv0, "QmPrrHqJzto9m7SyiRzarwkqPcCSsKR2EB1AyqJfe8L8tN"},
		{"dir v0", planets, CIDv0, "QmWSgS32xQEcXMeqd3YPJLrNBLSdsfYCep2U7CFkyrjXwY"},
		{"nested dirs v0", moons, CIDv0, "QmVKvomp91nMih5j6hYBA8KjbiaYvEetU2Q7KvtZkLe9nQ"},
		{"raw leaf v1", planets + "/venus.txt", CIDv1, "bafkreihfsphazrk2ilejpekyltjeh5k4yvwgjuwg26ueafohqioeo3sdca"},
		{"dir v1", planets, CIDv1, "bafybeih7e5dmkyk25up5vxug4q3hrg2fxbzf23dfrac2fns5h7z4aa7ioi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Import(context.Background(), mdtest.Mock(), tc.path, tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Fatalf("CID %s, ipfs add gives %s", got, tc.want)
			}
		})
	}
}

// A file of many chunks and a tree of files come back byte for byte, and
// the export's own import gives the same CID.
func TestExportRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir() + "/src"
	big := make([]byte, 3*ChunkSize+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	writeFiles(t, src, map[string]string{"a/b/c.txt": "deep\n", "empty": "", "model.bin": string(big)})
	dag := mdtest.Mock()
	c, err := Import(ctx, dag, src, CIDv1)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir() + "/out"
	if err := Export(ctx, dag, c, dst, testLimits); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst + "/model.bin")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("model.bin differs after the round trip (err %v, %d bytes of %d)", err, len(got), len(big))
	}
	if b, err := os.ReadFile(dst + "/a/b/c.txt"); err != nil || string(b) != "deep\n" {
		t.Fatalf("a/b/c.txt: %q, %v", b, err)
	}
	again, err := Import(ctx, mdtest.Mock(), dst, CIDv1)
	if err != nil || !again.Equals(c) {
		t.Fatalf("re-import gives %s (%v), want %s", again, err, c)
	}
}

// A DAG whose directory names an entry ".." or "a/b" must not write
// outside the target: a hostile peer builds such DAGs by hand.
func TestExportRefusesEscapingNames(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"..", ".", "a/../../x", "/etc/passwd", "", `..\\x`, "a\x00b"} {
		t.Run(name, func(t *testing.T) {
			dag := mdtest.Mock()
			leaf := merkledag.NodeWithData(unixfs.FilePBData([]byte("pwned\n"), 6))
			if err := dag.Add(ctx, leaf); err != nil {
				t.Fatal(err)
			}
			dir := unixfs.EmptyDirNode()
			if err := dir.AddNodeLink(name, leaf); err != nil {
				t.Fatal(err)
			}
			if err := dag.Add(ctx, dir); err != nil {
				t.Fatal(err)
			}
			parent := t.TempDir()
			err := Export(ctx, dag, dir.Cid(), filepath.Join(parent, "out"), testLimits)
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("export of an entry named %q: %v, want ErrUnsafePath", name, err)
			}
			onlyTarget(t, parent, "out")
		})
	}
}

func TestImportRefusesSymlinks(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"ok.txt": "ok"})
	if err := os.Symlink("/etc/passwd", src+"/link"); err != nil {
		t.Fatal(err)
	}
	_, err := Import(context.Background(), mdtest.Mock(), src, CIDv1)
	if !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("import of a tree with a symlink: %v, want ErrUnsafePath", err)
	}
}

// onlyTarget fails if anything but target was created in parent: an
// export that escaped its target would leave something beside it.
func onlyTarget(t testing.TB, parent, target string) {
	t.Helper()
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != target {
			t.Fatalf("export wrote %q beside its target", e.Name())
		}
	}
}

func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var testLimits = ExportLimits{MaxBytes: 1 << 30, MaxEntries: 10_000}

// Four blocks whose links all name one leaf describe 174^2 chunks: the
// export stops at its byte limit instead of filling the disk.
func TestExportBoundsAmplification(t *testing.T) {
	ctx := context.Background()
	dag := mdtest.Mock()
	leaf := merkledag.NodeWithData(unixfs.FilePBData(make([]byte, ChunkSize), ChunkSize))
	if err := dag.Add(ctx, leaf); err != nil {
		t.Fatal(err)
	}
	fanout := func(child *merkledag.ProtoNode, size uint64) *merkledag.ProtoNode {
		fsn := unixfs.NewFSNode(unixfs.TFile)
		n := new(merkledag.ProtoNode)
		for i := 0; i < 174; i++ {
			fsn.AddBlockSize(size)
			if err := n.AddNodeLink("", child); err != nil {
				t.Fatal(err)
			}
		}
		data, err := fsn.GetBytes()
		if err != nil {
			t.Fatal(err)
		}
		n.SetData(data)
		if err := dag.Add(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	mid := fanout(leaf, ChunkSize)
	root := fanout(mid, 174*ChunkSize)
	dst := filepath.Join(t.TempDir(), "bomb")
	err := Export(ctx, dag, root.Cid(), dst, ExportLimits{MaxBytes: 8 << 20, MaxEntries: 10})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("export of a %d GiB DAG under an 8 MiB limit: %v, want ErrTooLarge", 174*174*ChunkSize>>30, err)
	}
	if st, err := os.Stat(dst); err == nil && st.Size() > 8<<20 {
		t.Fatalf("wrote %d bytes past the limit", st.Size())
	}
	// A directory of many entries stops at the entry limit.
	dir := unixfs.EmptyDirNode()
	for i := 0; i < 50; i++ {
		if err := dir.AddNodeLink(fmt.Sprintf("f%02d", i), leaf); err != nil {
			t.Fatal(err)
		}
	}
	if err := dag.Add(ctx, dir); err != nil {
		t.Fatal(err)
	}
	err = Export(ctx, dag, dir.Cid(), filepath.Join(t.TempDir(), "many"), ExportLimits{MaxBytes: 1 << 30, MaxEntries: 20})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("export of 50 entries under a limit of 20: %v, want ErrTooLarge", err)
	}
}
