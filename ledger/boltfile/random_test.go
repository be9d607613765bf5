package boltfile

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Random damage to the pages a database reaches (headers, elements, the
// meta pages, the freelist; sometimes a cut) never crashes: Open either
// refuses the file as damaged or returns a database that can be read
// through and written. (Run with many more rounds while changing the
// walk: GLEANER_DAMAGE_ROUNDS=3000.)
func TestRandomDamageNeverCrashes(t *testing.T) {
	rounds := 150
	if testing.Short() {
		rounds = 30
	}
	if n, err := parseInt(os.Getenv("GLEANER_DAMAGE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	dir := t.TempDir()
	orig := build(t, dir, 5000, 40)
	good := readAll(t, orig)
	ps, _, leaves := pages(t, orig, "leaf")
	_, _, branches := pages(t, orig, "branch")
	_, _, fl := pages(t, orig, "freelist")
	targets := append(append(append([]int{0, 1}, leaves...), branches...), fl...)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	seed := uint64(time.Now().UnixNano())
	if n, err := parseInt(os.Getenv("GLEANER_DAMAGE_SEED")); err == nil {
		seed = uint64(n)
	}
	t.Logf("seed %d (GLEANER_DAMAGE_SEED repeats it)", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	var opened, refused int
	for i := 0; i < rounds; i++ {
		b := append([]byte(nil), good...)
		for j := 1 + r.IntN(4); j > 0; j-- {
			off := targets[r.IntN(len(targets))]*ps + r.IntN(300)
			if off >= len(b) {
				continue
			}
			switch r.IntN(20) {
			case 0:
				b = b[:off]
			case 1, 2, 3, 4, 5, 6, 7, 8, 9:
				b[off] ^= byte(1 + r.IntN(255))
			default:
				for k := 0; k < 16 && off+k < len(b); k++ {
					b[off+k] = byte(r.Uint32())
				}
			}
		}
		path := filepath.Join(dir, "r.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path, Options{Buckets: testBuckets, Timeout: time.Second, Logger: quiet})
		switch {
		case errors.Is(err, ErrDamaged):
			refused++
		case err != nil:
			t.Fatalf("round %d: %v, want a *DamagedError or a database", i, err)
		default:
			opened++
			if p := guard(func() { useAll(t, db) }); p != "" {
				t.Errorf("round %d: opened, then using it panicked: %s", i, p)
			}
			db.Close()
		}
	}
	t.Logf("%d rounds: %d refused as damaged, %d opened (damage in free pages or in values)", rounds, refused, opened)
}

// useAll reads every key and value of every bucket and writes one.
func useAll(t *testing.T, db *bolt.DB) {
	var sink byte
	var walk func(b *bolt.Bucket)
	walk = func(b *bolt.Bucket) {
		_ = b.ForEach(func(k, v []byte) error {
			if v == nil {
				if c := b.Bucket(k); c != nil {
					walk(c)
				}
			}
			for _, c := range v {
				sink ^= c
			}
			return nil
		})
	}
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { walk(b); return nil })
	})
	_ = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("a")).Put([]byte("new"), []byte{sink}) })
}

func parseInt(s string) (int, error) {
	var n int
	_, err := fmt.Sscan(s, &n)
	return n, err
}
