// Package ledgertest builds real ledger stores for tests: actors with keys
// of their own and a store holding their feeds, each entry appended with
// its author's key, as replication would leave them. Only tests import it.
package ledgertest

import (
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Actor is a signing identity.
type Actor struct {
	Key crypto.PrivKey
	ID  string
}

// NewActor is a fresh Ed25519 identity.
func NewActor(t testing.TB) Actor {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return Actor{k, id.String()}
}

// World is a real store (ledger.db in a temporary directory) and the head
// of each actor's feed in it.
type World struct {
	T     *testing.T
	St    *ledger.Store
	Heads map[string]*ledger.Entry
}

// NewWorld opens an empty store that closes when the test ends.
func NewWorld(t *testing.T) *World {
	t.Helper()
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &World{T: t, St: st, Heads: map[string]*ledger.Entry{}}
}

// Append adds an entry of typ to a's feed, signed by a, at time at.
func (w *World) Append(a Actor, typ string, payload []byte, at time.Time) {
	w.T.Helper()
	e, se, err := ledger.NewEntry(a.Key, w.Heads[a.ID], typ, payload, at)
	if err != nil {
		w.T.Fatal(err)
	}
	if err := w.St.Append(se); err != nil {
		w.T.Fatal(err)
	}
	w.Heads[a.ID] = e
}
