package data

import (
	"context"
	"errors"
	"slices"
	"testing"

	mdtest "github.com/ipfs/boxo/ipld/merkledag/test"
)

// subsetTree is an input with nested directories, an empty file and a
// file of several chunks.
var subsetTree = map[string]string{
	"a.txt":          "alpha\n",
	"b/c.txt":        "charlie\n",
	"b/d/e.bin":      noise(5, 3*ChunkSize+17),
	"b/empty":        "",
	"z/last.txt":     "zulu\n",
	"z/deeper/y.txt": "yankee\n",
}

// ListFiles gives every file once, in path order, with its size; a
// subset of them builds the very directory that importing only those
// files gives (the same CID: the same layout as `ipfs add`), writing
// only directory nodes, and it exports to exactly those files.
func TestSubsetIsTheImportOfItsFiles(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	src := t.TempDir() + "/in"
	writeFiles(t, src, subsetTree)
	root, err := s.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	files, err := s.ListFiles(ctx, root, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.txt", "b/c.txt", "b/d/e.bin", "b/empty", "z/deeper/y.txt", "z/last.txt"}
	if len(files) != len(want) {
		t.Fatalf("listed %+v", files)
	}
	for i, f := range files {
		if f.Path != want[i] || f.Size != uint64(len(subsetTree[f.Path])) {
			t.Errorf("file %d: %s of %d bytes, want %s of %d", i, f.Path, f.Size, want[i], len(subsetTree[want[i]]))
		}
	}

	pick := []DirFile{files[2], files[3], files[4]} // b/d/e.bin, b/empty, z/deeper/y.txt
	before := s.Used()
	sub, err := s.AddSubset(ctx, root, pick)
	if err != nil {
		t.Fatal(err)
	}
	if grew := s.Used() - before; grew > 2048 {
		t.Errorf("the subset wrote %d bytes: it copied file data", grew)
	}
	only := t.TempDir() + "/only"
	writeFiles(t, only, map[string]string{"b/d/e.bin": subsetTree["b/d/e.bin"], "b/empty": "", "z/deeper/y.txt": "yankee\n"})
	direct, err := Import(ctx, mdtest.Mock(), only, CIDv1)
	if err != nil {
		t.Fatal(err)
	}
	if sub != direct {
		t.Fatalf("subset %s, importing its files gives %s", sub, direct)
	}
	pins, _ := s.Pins(ctx)
	if !slices.Contains(pins, sub) {
		t.Fatal("the subset is not pinned")
	}
	out := t.TempDir() + "/out"
	if err := Export(ctx, s.DAG(), sub, out, testLimits); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListFiles(ctx, sub, 100)
	if err != nil || len(got) != 3 || got[0].Path != "b/d/e.bin" || got[2].Path != "z/deeper/y.txt" {
		t.Fatalf("the subset lists %+v (%v)", got, err)
	}
}

// A root that is one file is no directory to split; a tree past the
// entry bound stops the walk.
func TestListFilesRefusesAFileAndBoundsTheWalk(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	src := t.TempDir() + "/in"
	writeFiles(t, src, subsetTree)
	root, err := s.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListFiles(ctx, root, 8); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("6 files in 4 directories under a bound of 8: %v", err)
	}
	if _, err := s.ListFiles(ctx, root, 10); err != nil {
		t.Fatalf("under a bound of 10: %v", err)
	}
	one, err := s.Add(ctx, src+"/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListFiles(ctx, one, 10); !errors.Is(err, ErrNotDir) {
		t.Fatalf("a file's root: %v", err)
	}
}
