package replicate

import (
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

var quietLog = slog.New(slog.DiscardHandler)

// actor is a signing identity that is not a node (as in node's fraud tests).
type actor struct {
	key crypto.PrivKey
	id  string
}

func newActor(t testing.TB) actor {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return actor{k, id.String()}
}

// waitFor polls cond until it holds or timeout passes (as node's does).
func waitFor(b testing.TB, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
