package p2p

import (
	"context"
	"testing"
	"time"
)

// TestPathToSaysDirectOrNothing: before a connection PathTo is empty, over
// a plain TCP connection it is direct, and after a disconnect empty again.
// (A relayed path is checked on the emulated homes: testnet's
// TestNATHomes.)
func TestPathToSaysDirectOrNothing(t *testing.T) {
	a, b := newTestHost(t, "path-test"), newTestHost(t, "path-test")
	if p := a.PathTo(b.ID()); p != "" {
		t.Fatalf("before any connection: %q", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.LibP2P().Connect(ctx, info(b)); err != nil {
		t.Fatal(err)
	}
	if p := a.PathTo(b.ID()); p != PathDirect {
		t.Fatalf("over TCP: %q, want %q", p, PathDirect)
	}
	if err := a.Disconnect(b.ID()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the connection gone", func() bool { return a.PathTo(b.ID()) == "" })
}
