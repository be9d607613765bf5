package boltfile

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger/boltfile/bolttest"
	bolt "go.etcd.io/bbolt"
)

var testBuckets = [][]byte{[]byte("a"), []byte("b")}

// build writes a valid database at dir/test.db: n keys "k%07d" in bucket
// a (values of vsize bytes), a nested bucket with a few keys (an inline
// bucket) and one big value spanning overflow pages in bucket b.
func build(t testing.TB, dir string, n, vsize int) string {
	t.Helper()
	path := filepath.Join(dir, "test.db")
	db, err := Open(path, Options{Buckets: testBuckets, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 10000
	for lo := 0; lo < n; lo += batch {
		err = db.Update(func(tx *bolt.Tx) error {
			a := tx.Bucket([]byte("a"))
			for i := lo; i < lo+batch && i < n; i++ {
				v := bytes.Repeat([]byte{byte(i)}, vsize)
				if err := a.Put(fmt.Appendf(nil, "k%07d", i), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("b"))
		in, err := b.CreateBucketIfNotExists([]byte("inline"))
		if err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			if err := in.Put([]byte{byte('x' + i)}, []byte("small")); err != nil {
				return err
			}
		}
		return b.Put([]byte("big"), bytes.Repeat([]byte("B"), 3*os.Getpagesize()))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// pages returns the database's page size, high-water mark and the ids of
// its reachable pages of type typ ("leaf", "branch", "freelist").
func pages(t testing.TB, path, typ string) (ps int, hwm uint64, ids []int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		ps, hwm = db.Info().PageSize, uint64(tx.Size())/uint64(db.Info().PageSize)
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p == nil {
				return nil
			}
			if p.Type == typ {
				ids = append(ids, id)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return ps, hwm, ids
}

func readAll(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// remeta rewrites meta page i with fn applied to its body, checksum fixed:
// damage that bbolt's checksum cannot see.
func remeta(t testing.TB, path string, ps int, i int, fn func(body []byte)) {
	t.Helper()
	raw := readAll(t, path)
	body := raw[i*ps+pageHeaderSize : i*ps+pageHeaderSize+64]
	fn(body)
	h := fnv.New64a()
	h.Write(body[:56])
	order.PutUint64(body[56:], h.Sum64())
	bolttest.WriteAt(t, path, int64(i*ps+pageHeaderSize), body)
}

// newestMeta is the meta page (0 or 1) with the higher transaction ID.
func newestMeta(t testing.TB, path string, ps int) int {
	raw := readAll(t, path)
	if order.Uint64(raw[ps+pageHeaderSize+48:]) > order.Uint64(raw[pageHeaderSize+48:]) {
		return 1
	}
	return 0
}

func TestDamageIsAnErrorNamingTheFile(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		want   string // in the reason
	}{
		{"truncated to half", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()/2)
		}, "it was cut short"},
		{"truncated to 0 bytes", func(t *testing.T, path string) {
			os.Truncate(path, 0)
		}, "the file is empty"},
		{"truncated inside the first meta page", func(t *testing.T, path string) {
			os.Truncate(path, 100)
		}, "shorter than its two"},
		{"truncated by one page", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			ps, hwm, _ := pages(t, path, "leaf")
			os.Truncate(path, min(fi.Size(), int64(hwm)*int64(ps))-int64(ps))
		}, "it was cut short"},
		{"leaf page overwritten with garbage", func(t *testing.T, path string) {
			ps, _, leaves := pages(t, path, "leaf")
			bolttest.WriteAt(t, path, int64(leaves[len(leaves)/2]*ps), bolttest.Garbage(ps))
		}, "holds the header of page"},
		{"branch page overwritten with garbage", func(t *testing.T, path string) {
			ps, _, branches := pages(t, path, "branch")
			bolttest.WriteAt(t, path, int64(branches[0]*ps), bolttest.Garbage(ps))
		}, "holds the header of page"},
		{"freelist page overwritten with garbage", func(t *testing.T, path string) {
			ps, _, fl := pages(t, path, "freelist")
			bolttest.WriteAt(t, path, int64(fl[0]*ps), bolttest.Garbage(ps))
		}, "freelist"},
		{"leaf element pointing outside its page", func(t *testing.T, path string) {
			ps, _, leaves := pages(t, path, "leaf")
			off := int64(leaves[len(leaves)/2]*ps) + pageHeaderSize + 4 // first element's pos
			bolttest.WriteAt(t, path, off, []byte{0xff, 0xff, 0xff, 0x7f})
		}, "lies outside the page"},
		{"keys out of order (found by bbolt's check)", func(t *testing.T, path string) {
			raw := readAll(t, path)
			at := bytes.Index(raw, []byte("k0005000"))
			bolttest.WriteAt(t, path, int64(at), []byte("k9"))
		}, "bbolt check"},
		{"both meta pages corrupt", func(t *testing.T, path string) {
			ps, _, _ := pages(t, path, "leaf")
			bolttest.WriteAt(t, path, pageHeaderSize+8, bolttest.Garbage(8))
			bolttest.WriteAt(t, path, int64(ps)+pageHeaderSize+8, bolttest.Garbage(8))
		}, "neither meta page is valid"},
		{"meta page naming a root past the end", func(t *testing.T, path string) {
			ps, _, _ := pages(t, path, "leaf")
			m := newestMeta(t, path, ps)
			remeta(t, path, ps, m, func(b []byte) { order.PutUint64(b[16:], order.Uint64(b[40:])+10) })
		}, "root page"},
		{"meta page claiming more pages than the file holds", func(t *testing.T, path string) {
			ps, _, _ := pages(t, path, "leaf")
			m := newestMeta(t, path, ps)
			remeta(t, path, ps, m, func(b []byte) { order.PutUint64(b[40:], order.Uint64(b[40:])*4) })
		}, "it was cut short"},
		{"not a bbolt file at all", func(t *testing.T, path string) {
			os.WriteFile(path, bolttest.Garbage(64<<10), 0o600)
		}, "neither meta page is valid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := build(t, t.TempDir(), 20000, 40)
			c.damage(t, path)
			before := readAll(t, path)
			db, err := Open(path, Options{Buckets: testBuckets, Timeout: time.Second, Advice: "extra advice"})
			if err == nil {
				db.Close()
				t.Fatal("opened a damaged database")
			}
			var de *DamagedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("err = %v (%T), want a *DamagedError", err, err)
			}
			msg := err.Error()
			want := path + ": the database is damaged ("
			tail := "); restore it from a backup or move it aside to start with an empty one; extra advice"
			if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, tail) || strings.Contains(msg, "\n") {
				t.Fatalf("message = %q\nwant one line %q...%q", msg, want, tail)
			}
			if !strings.Contains(de.Reason, c.want) {
				t.Errorf("reason = %q, want it to mention %q", de.Reason, c.want)
			}
			if after := readAll(t, path); !bytes.Equal(before, after) {
				t.Errorf("the damaged file was changed (%d bytes before, %d after)", len(before), len(after))
			}
			// A second try says the same (nothing was half-repaired), and
			// the first one's lock was released.
			if _, err2 := Open(path, Options{Buckets: testBuckets, Timeout: time.Second, Advice: "extra advice"}); err2 == nil || err2.Error() != msg {
				t.Errorf("second open: %v, want %q", err2, msg)
			}
		})
	}
}

// A torn meta page is what a crash during a commit leaves; bbolt falls
// back to the other, which holds the previous transaction. That is not
// damage: the database opens, with a warning, and passes the check.
func TestOneTornMetaPageFallsBack(t *testing.T) {
	path := build(t, t.TempDir(), 2000, 40)
	ps, _, _ := pages(t, path, "leaf")
	bolttest.WriteAt(t, path, int64(newestMeta(t, path, ps)*ps)+pageHeaderSize+56, bolttest.Garbage(8)) // its checksum
	var logs bytes.Buffer
	db, err := Open(path, Options{Buckets: testBuckets, Timeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !strings.Contains(logs.String(), "is invalid") {
		t.Errorf("no warning about the torn meta page: %q", logs.String())
	}
	err = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("a")).Get([]byte("k0001999")); v == nil {
			return errors.New("k0001999 lost")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFreshCreateAndReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	db, err := Open(path, Options{Buckets: testBuckets})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		for _, b := range testBuckets {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("bucket %s missing", b)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(path + ".new"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	// A leftover temporary file (a crash during an earlier create) is
	// harmless; reopening an existing database adds missing buckets.
	os.WriteFile(filepath.Join(dir, "y.db.new"), []byte("junk"), 0o600)
	db, err = Open(filepath.Join(dir, "y.db"), Options{Buckets: testBuckets[:1]})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(filepath.Join(dir, "y.db"), Options{Buckets: testBuckets})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(testBuckets[1]) == nil {
			return errors.New("bucket b not added on reopen")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The lock of another process (here: another open) is a timeout, not damage.
func TestLockedIsNotDamage(t *testing.T) {
	path := build(t, t.TempDir(), 10, 10)
	db, err := Open(path, Options{Buckets: testBuckets})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Open(path, Options{Buckets: testBuckets, Timeout: 50 * time.Millisecond})
	if err == nil || errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("second open = %v, want a timeout that is not damage", err)
	}
}

// Past its budget the check stops, says so in one log line, and the
// database opens.
func TestCheckBudgetIsBounded(t *testing.T) {
	path := build(t, t.TempDir(), 60000, 40) // ~ 1000 pages: the walk looks at the clock every 256
	var logs bytes.Buffer
	db, err := Open(path, Options{Buckets: testBuckets, CheckBudget: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if !strings.Contains(logs.String(), "integrity check stopped after") || strings.Count(logs.String(), "\n") != 1 {
		t.Fatalf("log = %q, want one line saying the check stopped", logs.String())
	}
	// With room, the walk and bbolt's check both run and find nothing.
	logs.Reset()
	db, err = Open(path, Options{Buckets: testBuckets, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if logs.Len() != 0 {
		t.Fatalf("log = %q, want nothing", logs.String())
	}
}

// BenchmarkOpenCheck opens and checks a store of 100k small entries (4402
// pages, 18 MB of them, in a 33 MiB file) as the stores do: the structural walk, bbolt's open and its Tx.Check
// (ns/op). walk-ms and check-ms split it; checkFactor rests on their ratio.
func BenchmarkOpenCheck(b *testing.B) {
	path := build(b, b.TempDir(), 100_000, 64)
	fi, _ := os.Stat(path)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		db, err := Open(path, Options{Buckets: testBuckets})
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
	}
	b.StopTimer()
	t0 := time.Now()
	f, _ := os.Open(path)
	m, reason, _ := readMeta(f, fi.Size())
	w := &walker{f: f, ps: uint64(m.pageSize), hwm: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
	if err := w.walk(m); err != nil || reason != "" {
		b.Fatal(reason, err)
	}
	f.Close()
	walk := time.Since(t0)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	if r := check(db); r != "" {
		b.Fatal(r)
	}
	chk := time.Since(t1)
	db.Close()
	b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
	b.ReportMetric(float64(w.pages), "pages")
	b.ReportMetric(float64(walk.Microseconds())/1000, "walk-ms")
	b.ReportMetric(float64(chk.Microseconds())/1000, "check-ms")
}
