package ledger

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/ledger/boltfile"
	"github.com/gleaner-net/gleaner/ledger/boltfile/bolttest"
)

// A damaged ledger.db is an error naming the file and what to do, never a
// panic, and is left as it was: never silently recreated.
func TestDamagedLedgerIsAnErrorNamingTheFile(t *testing.T) {
	for _, d := range bolttest.Damages {
		t.Run(d.Name, func(t *testing.T) {
			s, path := openTemp(t)
			k := newKey(t)
			var prev *Entry
			var ses []*SignedEntry
			for i := 0; i < 300; i++ {
				e, se, _ := mustEntry(t, k, prev, strings.Repeat("p", 200))
				prev, ses = e, append(ses, se)
			}
			if errs, err := s.AppendBatch(ses); err != nil || errors.Join(errs...) != nil {
				t.Fatal(err, errors.Join(errs...))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			d.Do(t, path)
			before, _ := os.ReadFile(path)

			s, err := OpenStore(path)
			if err == nil {
				s.Close()
				t.Fatal("a damaged ledger.db opened")
			}
			msg := err.Error()
			if !errors.Is(err, boltfile.ErrDamaged) || strings.Contains(msg, "\n") ||
				!strings.HasPrefix(msg, path+": the database is damaged (") ||
				!strings.HasSuffix(msg, "; restore it from a backup or move it aside to start with an empty one; other nodes' feeds re-replicate from peers, and at start this node recovers its own feed from the peers that hold it before it appends; only what no peer holds is lost") {
				t.Fatalf("err = %q", msg)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatalf("ledger.db changed by the failed open: %d bytes before, %d after", len(before), len(after))
			}
		})
	}
	// Moved aside, as the message says: an empty ledger starts.
	_, path := openTemp(t)
	os.Truncate(path, 0)
	if err := os.Rename(path, path+".damaged"); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
