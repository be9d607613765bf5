package p2p

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"
)

const (
	dialTimeout      = 15 * time.Second
	reprovideEvery   = time.Hour // provider records live 48 h in kad-dht
	maxParallelDials = 8
)

// CapabilityCID is the DHT key under which nodes with a capability provide:
// CIDv1 raw sha2-256 of "gleaner/N/cap/<dimension>/<value>".
func (h *Host) CapabilityCID(dimension, value string) cid.Cid {
	sum, _ := mh.Sum([]byte("gleaner/"+h.cfg.network+"/cap/"+dimension+"/"+value), mh.SHA2_256, -1)
	return cid.NewCidV1(cid.Raw, sum)
}

// Provide announces in the DHT that this node provides c.
func (h *Host) Provide(ctx context.Context, c cid.Cid) error {
	return h.dht.Provide(ctx, c, true)
}

// FindProviders returns up to max providers of c other than this node
// (max <= 0: as many as the lookup finds).
func (h *Host) FindProviders(ctx context.Context, c cid.Cid, max int) ([]peer.AddrInfo, error) {
	n := max
	if n > 0 {
		n++ // room for ourselves, filtered below
	}
	var out []peer.AddrInfo
	for ai := range h.dht.FindProvidersAsync(ctx, c, n) {
		if ai.ID == h.h.ID() {
			continue
		}
		out = append(out, ai)
		if max > 0 && len(out) == max {
			break
		}
	}
	if len(out) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// discoveryLoop bootstraps, then keeps this node advertised under
// CapabilityCID("node","any") and dials advertised peers while below the
// low watermark. The first round runs right after bootstrap so a new node
// fills its connection table in seconds, not after one interval.
func (h *Host) discoveryLoop() {
	defer h.wg.Done()
	select { // dial from the listen ports (see bootstrapPeers)
	case <-h.listening:
	case <-h.ctx.Done():
		return
	}
	h.connectAll(h.cfg.bootstrap)
	if err := h.dht.Bootstrap(h.ctx); err != nil {
		h.log.Debug("dht bootstrap", "err", err)
	}
	h.waitForRoutingTable(10 * time.Second)
	key := h.CapabilityCID("node", "any")
	var provided time.Time
	// A young network's routing tables are small, so the first provider
	// records land on whichever few peers were known; re-advertise soon
	// and then less often (2 s, 4 s, ... up to reprovideEvery) so that the
	// records reach the key's true closest peers as the network fills in.
	reprovide := 2 * time.Second
	every := h.cfg.discoverEvery
	if every == 0 {
		every = defaultDiscoverEvery // still reprovide; just never dial
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if time.Since(provided) > reprovide {
			// Failure is normal for the first node of a network (empty
			// routing table); retry next round.
			ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
			if err := h.Provide(ctx, key); err == nil {
				provided = time.Now()
				reprovide = min(reprovide*2, reprovideEvery)
			} else {
				h.log.Debug("advertise failed", "err", err)
			}
			cancel()
		}
		if h.cfg.discoverEvery > 0 {
			h.findMorePeers(key)
		}
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Host) waitForRoutingTable(max time.Duration) {
	deadline := time.Now().Add(max)
	for h.dht.RoutingTable().Size() == 0 && time.Now().Before(deadline) {
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (h *Host) findMorePeers(key cid.Cid) {
	have := len(h.h.Network().Peers())
	if have >= h.cfg.connLow {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	found, err := h.FindProviders(ctx, key, 2*h.cfg.connLow)
	if err != nil {
		return
	}
	var todo []peer.AddrInfo
	for _, ai := range found {
		if len(h.h.Network().ConnsToPeer(ai.ID)) == 0 && !h.isForeign(ai.ID) {
			todo = append(todo, ai)
		}
	}
	if need := h.cfg.connLow - have; len(todo) > need {
		todo = todo[:need]
	}
	h.connectAll(todo)
}

// connectAll dials peers in parallel (bounded) and waits for all attempts.
func (h *Host) connectAll(peers []peer.AddrInfo) {
	sem := make(chan struct{}, maxParallelDials)
	var wg sync.WaitGroup
	for _, ai := range peers {
		if ai.ID == h.h.ID() {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(h.ctx, dialTimeout)
			defer cancel()
			if err := h.Connect(ctx, ai); err != nil && !errors.Is(err, context.Canceled) {
				h.log.Debug("dial failed", "peer", ai.ID, "err", err)
			}
		}()
	}
	wg.Wait()
}

type mdnsNotifee struct{ h *Host }

func (n mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	if ai.ID == n.h.ID() || n.h.ctx.Err() != nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(n.h.ctx, dialTimeout)
		defer cancel()
		_ = n.h.Connect(ctx, ai)
	}()
}
