package node

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestAccessAcrossRestart: the renter's grant of a job's inputs to its
// provider and a public root are in node.db (bbolt), so a node reopened
// from the same files serves the provider and everyone exactly as before;
// a grant that ended while it was down is gone, from memory and from
// node.db; a revoked grant is not back after the restart.
func TestAccessAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func() (*store.Store, *data.Store, *data.Access) {
		st, err := store.Open(filepath.Join(dir, "node.db"))
		if err != nil {
			t.Fatal(err)
		}
		ds, err := data.OpenStore(filepath.Join(dir, "data"), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		acc := data.NewAccess(ds, 0)
		if err := loadAccess(ctx, st, acc, slog.Default()); err != nil {
			t.Fatal(err)
		}
		return st, ds, acc
	}
	closeAll := func(st *store.Store, ds *data.Store, acc *data.Access) {
		acc.Close()
		ds.Close()
		st.Close()
	}
	st, ds, acc := open()
	add := func(name, body string) cid.Cid {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := ds.AddWrapped(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	inputs, short, revoked, public := add("in", "the job's inputs"), add("old", "an earlier job's"), add("rev", "revoked"), add("pub", "a public dataset")
	provider, other := newPeer(t), newPeer(t)
	if err := grantAccess(ctx, st, acc, provider, []cid.Cid{inputs, revoked}, time.Now().Add(time.Hour), "job-1"); err != nil {
		t.Fatal(err)
	}
	if err := grantAccess(ctx, st, acc, provider, []cid.Cid{short}, time.Now().Add(500*time.Millisecond), "job-0"); err != nil {
		t.Fatal(err)
	}
	if err := revokeAccess(st, acc, provider, []cid.Cid{revoked}); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *store.Tx) error { return tx.Put(store.BucketAccess, publicKey(public), accessRecord{}) }); err != nil {
		t.Fatal(err)
	}
	if err := acc.Publish(ctx, public); err != nil {
		t.Fatal(err)
	}
	closeAll(st, ds, acc)
	time.Sleep(600 * time.Millisecond) // the short grant ends while the node is down

	st, ds, acc = open()
	defer closeAll(st, ds, acc)
	switch {
	case !acc.Allow(provider, inputs):
		t.Error("after the restart the provider is refused the inputs of its running lease")
	case acc.Allow(other, inputs):
		t.Error("after the restart another peer is served the private inputs")
	case acc.Allow(provider, short):
		t.Error("a grant that ended while the node was down is served after the restart")
	case acc.Allow(provider, revoked):
		t.Error("a revoked grant is back after the restart")
	case !acc.Allow(other, public):
		t.Error("after the restart a public root is refused")
	}
	left := 0
	if err := st.ForEach(store.BucketAccess, func(string, []byte) error { left++; return nil }); err != nil {
		t.Fatal(err)
	}
	if left != 2 {
		t.Errorf("node.db holds %d access records after the restart, want 2 (the live grant and the public root)", left)
	}
}

func newPeer(t *testing.T) peer.ID {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
