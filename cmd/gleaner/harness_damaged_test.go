package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/boltfile/bolttest"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

// A damaged database makes `gleaner daemon` exit 1 with one line naming
// the file and what to do: no panic, no stack trace, and the file is not
// recreated behind the user's back.
func TestDaemonRefusesADamagedDatabase(t *testing.T) {
	const advice = "; restore it from a backup or move it aside to start with an empty one"
	cases := []struct {
		name, file, want string
		damage           func(t testing.TB, path string)
	}{
		{"empty node.db", repo.StoreFile, "(the file is empty)" + advice, func(t testing.TB, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"node.db cut to half", repo.StoreFile, "it was cut short)" + advice, bolttest.TruncateHalf},
		{"node.db page overwritten", repo.StoreFile, advice, bolttest.GarbageLeaf},
		{"ledger.db cut to half", repo.LedgerFile, "it was cut short)" + advice + "; other nodes' feeds re-replicate from peers, and at start this node recovers its own feed from the peers that hold it before it appends; only what no peer holds is lost", bolttest.TruncateHalf},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := initRepo(t)
			path := filepath.Join(dir, c.file)
			fill(t, c.file, path)
			c.damage(t, path)
			before, _ := os.ReadFile(path)

			r := gleaner(t, "--repo", dir, "daemon", "--mdns=false",
				"--listen", "/ip4/127.0.0.1/tcp/0", "--rpc", "127.0.0.1:0")
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\nstderr: %s", r.code, r.stderr)
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "hint:") {
				t.Fatalf("stderr is not one error line:\n%s", r.stderr)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
				if strings.HasPrefix(l, "gleaner: ") {
					errLines = append(errLines, l)
				}
			}
			prefix := "gleaner: " + path + ": the database is damaged ("
			if len(errLines) != 1 || !strings.HasPrefix(errLines[0], prefix) || !strings.HasSuffix(errLines[0], c.want) {
				t.Fatalf("stderr:\n%s\nwant one line %q...%q", r.stderr, prefix, c.want)
			}
			if c.file == repo.StoreFile && strings.TrimRight(r.stderr, "\n") != errLines[0] {
				t.Errorf("node.db is opened first: stderr should be the one line, got:\n%s", r.stderr)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("%s was changed: %d bytes before, %d after", c.file, len(before), len(after))
			}
		})
	}
}

// fill writes the database at path as the daemon would have left it,
// without starting one: node.db with some records, ledger.db (beside a
// sound node.db, so that the daemon gets as far as it) with its buckets.
func fill(t *testing.T, file, path string) {
	t.Helper()
	if file == repo.LedgerFile {
		lst, err := ledger.OpenStore(path)
		if err != nil {
			t.Fatal(err)
		}
		lst.Close()
		path = filepath.Join(filepath.Dir(path), repo.StoreFile)
	}
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Update(func(tx *store.Tx) error {
		for i := 0; i < 1000; i++ {
			if err := tx.Put([]byte("jobs"), fmt.Sprintf("job-%04d", i), map[string]int{"n": i}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
