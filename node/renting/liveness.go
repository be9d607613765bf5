package renting

import (
	"context"
	"time"

	"github.com/gleaner-net/gleaner/node/peers"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A serving replica's provider is watched more closely than a batch
// job's: a batch job waits out lostAfter (three missed heartbeats) and
// renter.ReattachFor for a provider that may come back, but a service has other
// replicas serving and a successor to place, so a provider that stops
// answering pings for replicaPingMisses in a row (about three seconds)
// is given up at once, without coming back to it: the service's keeper
// places the replica again elsewhere. A connection that died without a
// word (a machine gone, a QUIC path cut) is seen by the pings failing,
// not only by the stream.
const (
	replicaPingEvery  = time.Second
	replicaPingMisses = 3
)

// watchLiveness pings provider every replicaPingEvery while ctx lives,
// and resets s, the replica's job stream, once replicaPingMisses pings in
// a row have failed: its follower then sees the provider lost. Each
// answered ping also refreshes the provider's RTT in the peerstore, which
// the gateway's routing reads.
func (r *Jobs) watchLiveness(ctx context.Context, job string, provider peer.ID, s network.Stream) {
	prober := peers.NewProber(r.m.Host().LibP2P(), 1)
	t := time.NewTicker(replicaPingEvery)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, replicaPingEvery)
		_, err := prober.Measure(pctx, provider)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			misses = 0
			continue
		}
		if misses++; misses >= replicaPingMisses {
			r.log.Warn("a replica's provider stopped answering pings: giving it up", "job", job, "provider", provider, "misses", misses, "err", err)
			_ = s.Reset()
			return
		}
	}
}
