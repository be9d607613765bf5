package renting

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// A replica's provider that stops answering pings while its connection
// stays up (a hung machine, a path that drops packets without a word) is
// given up within replicaPingMisses pings: its job stream is reset. While
// it answers, the stream is left alone.
func TestAReplicasSilentProviderIsGivenUpWithinSeconds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, self, peer := networkedJobs(t, ctx) // peer is the provider: a bare host on the same network
	const proto = "/gleaner-test/hold/1"
	held := make(chan network.Stream, 1)
	peer.LibP2P().SetStreamHandler(proto, func(s network.Stream) { held <- s })
	s, err := self.LibP2P().NewStream(ctx, peer.ID(), proto)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	<-held
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	done := make(chan struct{})
	go func() { defer close(done); r.watchLiveness(wctx, "job-1", peer.ID(), s) }()

	// Answering: nothing happens for well past the misses it takes.
	time.Sleep((replicaPingMisses + 2) * replicaPingEvery)
	select {
	case <-done:
		t.Fatal("the watcher gave up a provider that answers its pings")
	default:
	}
	// Silent: no more pings are answered, and the connection stays.
	peer.LibP2P().RemoveStreamHandler(ping.ID)
	silent := time.Now()
	select {
	case <-done:
	case <-time.After((replicaPingMisses + 3) * replicaPingEvery):
		t.Fatalf("the watcher did not give the silent provider up within %v", (replicaPingMisses+3)*replicaPingEvery)
	}
	took := time.Since(silent)
	_ = s.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := s.Read(make([]byte, 1)); err == nil {
		t.Fatal("the replica's stream still reads after the provider was given up")
	}
	if self.LibP2P().Network().Connectedness(peer.ID()) != network.Connected {
		t.Fatal("the connection closed: this test meant a provider that goes silent on a live connection")
	}
	t.Logf("given up %v after the provider went silent", took.Round(100*time.Millisecond))
}
