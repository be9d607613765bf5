package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/ledger/boltfile"
	"github.com/gleaner-net/gleaner/ledger/boltfile/bolttest"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

// A damaged node.db is an error naming the file and what to do, never a
// panic, and is left as it was: an empty or cut-short file is not
// silently recreated.
func TestDamagedNodeStoreIsAnErrorNamingTheFile(t *testing.T) {
	for _, d := range bolttest.Damages {
		t.Run(d.Name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), repo.StoreFile)
			st, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			err = st.Update(func(tx *store.Tx) error {
				for i := 0; i < 2000; i++ {
					if err := tx.Put(store.BucketJobs, fmt.Sprintf("job-%05d", i), map[string]string{"state": "done"}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			d.Do(t, path)
			before, _ := os.ReadFile(path)

			st, err = store.Open(path)
			if err == nil {
				st.Close()
				t.Fatal("a damaged node.db opened")
			}
			msg := err.Error()
			if !errors.Is(err, boltfile.ErrDamaged) || strings.Contains(msg, "\n") ||
				!strings.HasPrefix(msg, path+": the database is damaged (") ||
				!strings.HasSuffix(msg, "; restore it from a backup or move it aside to start with an empty one") {
				t.Fatalf("err = %q", msg)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatalf("node.db changed by the failed open: %d bytes before, %d after", len(before), len(after))
			}
		})
	}
}
