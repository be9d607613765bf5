// Package bolttest damages bbolt files for tests, the ways disks and
// people do: cut short, emptied, a page overwritten, the meta pages
// corrupted. Every damage touches pages the database reaches, so that a
// sound reader must notice it.
package bolttest

import (
	"crypto/rand"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A Damage is one way to damage the (closed) database at path.
type Damage struct {
	Name string
	Do   func(t testing.TB, path string)
}

// Damages are the ways every store's tests try.
var Damages = []Damage{
	{"truncated to half", TruncateHalf},
	{"truncated to 0 bytes", TruncateEmpty},
	{"a leaf page overwritten with garbage", GarbageLeaf},
	{"both meta pages corrupt", CorruptMetas},
}

// TruncateHalf cuts the file to half its size.
func TruncateHalf(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// TruncateEmpty cuts the file to 0 bytes.
func TruncateEmpty(t testing.TB, path string) {
	t.Helper()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
}

// GarbageLeaf overwrites a reachable leaf page with random bytes.
func GarbageLeaf(t testing.TB, path string) {
	t.Helper()
	ps, leaves := Pages(t, path, "leaf")
	if len(leaves) == 0 {
		t.Fatal("no leaf page")
	}
	WriteAt(t, path, int64(leaves[len(leaves)/2]*ps), Garbage(ps))
}

// CorruptMetas spoils both meta pages (their page size and flags, so
// that their checksums fail). One bad meta page is what a crash during a
// commit leaves, and bbolt uses the other; both is damage.
func CorruptMetas(t testing.TB, path string) {
	t.Helper()
	ps, _ := Pages(t, path, "leaf")
	WriteAt(t, path, 16+8, Garbage(8))
	WriteAt(t, path, int64(ps)+16+8, Garbage(8))
}

// Pages returns the database's page size and the ids of its reachable
// pages of type typ ("leaf", "branch", "freelist").
func Pages(t testing.TB, path, typ string) (ps int, ids []int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ps = db.Info().PageSize
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if p.Type == typ {
				ids = append(ids, id)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return ps, ids
}

// WriteAt overwrites the file at off with b.
func WriteAt(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Garbage is n random bytes.
func Garbage(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
