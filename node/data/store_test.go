package data

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/go-cid"
)

func openStore(t *testing.T, dir string, quota int64) *Store {
	t.Helper()
	s, err := OpenStore(dir, quota)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What is added and pinned is there after the store is closed and opened
// again, with the same byte count: a provider's cache survives a restart.
func TestStoreSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir() + "/blocks"
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"train.csv": noise(4, 600_000), "labels": "a\nb\n"})
	s := openStore(t, dir, 64<<20)
	c, err := s.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	used := s.Used()
	if used < 600_000 {
		t.Fatalf("used %d bytes after adding 600 KB", used)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, 64<<20)
	defer s.Close()
	if s.Used() != used {
		t.Fatalf("used %d after reopening, %d before", s.Used(), used)
	}
	pins, err := s.Pins(ctx)
	if err != nil || len(pins) != 1 || !pins[0].Equals(c) {
		t.Fatalf("pins after reopening: %v (%v), want [%s]", pins, err, c)
	}
	out := t.TempDir() + "/out"
	if err := Export(ctx, s.DAG(), c, out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "labels")); string(b) != "a\nb\n" {
		t.Fatalf("labels after reopening: %q", b)
	}
}

// A write past the quota fails with ErrQuota and stores nothing of the
// refused block; what was stored before stays.
func TestStoreQuota(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 1<<20)
	defer s.Close()
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"big": noise(1, 3<<20)})
	_, err := s.Add(ctx, src)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("adding 3 MiB to a 1 MiB store: %v, want ErrQuota", err)
	}
	if s.Used() > s.Quota() {
		t.Fatalf("used %d, over the quota %d", s.Used(), s.Quota())
	}
	if _, err := OpenStore(t.TempDir(), 0); err == nil {
		t.Fatal("a store with a zero quota opened")
	}
}

// GC removes what no pin reaches and keeps what one does, counting the
// bytes it freed.
func TestStoreGC(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	keep, drop := t.TempDir(), t.TempDir()
	writeFiles(t, keep, map[string]string{"k": noise(2, 800_000)})
	writeFiles(t, drop, map[string]string{"d": noise(3, 800_000)})
	kc, err := s.Add(ctx, keep)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := s.Add(ctx, drop)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Unpin(ctx, dc); err != nil {
		t.Fatal(err)
	}
	before := s.Used()
	res, err := s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed == 0 || res.Freed < 800_000 || s.Used() != before-res.Freed {
		t.Fatalf("GC %+v, used %d -> %d", res, before, s.Used())
	}
	if has(t, s, dc) {
		t.Fatal("the unpinned root survived GC")
	}
	if err := Export(ctx, s.DAG(), kc, t.TempDir()+"/out"); err != nil {
		t.Fatalf("the pinned tree after GC: %v", err)
	}
	again, err := s.GC(ctx)
	if err != nil || again.Removed != 0 {
		t.Fatalf("a second GC removed %+v (%v)", again, err)
	}
}

// noise is n bytes that do not repeat, so no chunk deduplicates.
func noise(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return string(b)
}

func has(t *testing.T, s *Store, c cid.Cid) bool {
	ok, err := s.Blockstore().Has(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
