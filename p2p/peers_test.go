package p2p

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// A person retrying a dial by hand gets a real dial, not libp2p's "dial
// backoff" left by the failure they just fixed.
func TestConnectNowForgetsDialBackoff(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port))
	id, _ := peer.IDFromPrivateKey(key)
	ai := peer.AddrInfo{ID: id, Addrs: []ma.Multiaddr{addr}}
	a := newTestHost(t, "backoff")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx, ai); err == nil {
		t.Fatal("dialled a peer that is not listening")
	}
	newTestHost(t, "backoff", Identity(key), ListenAddrs(addr)) // the peer comes up
	if err := a.Connect(ctx, ai); err == nil || !strings.Contains(err.Error(), "backoff") {
		t.Fatalf("expected libp2p's dial backoff on a plain Connect, got %v", err)
	}
	if err := a.ConnectNow(ctx, ai); err != nil {
		t.Fatalf("ConnectNow: %v", err)
	}
}
