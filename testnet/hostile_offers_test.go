package testnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// rogueOffer is a well-formed offer by key's peer, issued at issued.
func rogueOffer(t *testing.T, id peer.ID, issued time.Time, ttl time.Duration, seq uint64) *auction.Offer {
	t.Helper()
	return &auction.Offer{
		Provider: id.String(), Network: "local", Seq: seq,
		IssuedAt: issued.Unix(), ExpiresAt: issued.Add(ttl).Unix(),
		GPUs:   []auction.GPU{{Model: "H100", VRAMMiB: 81559, ComputeCap: "9.0"}},
		Host:   auction.Host{CPUs: 32, MemoryMiB: 256000},
		Region: auction.Region{Country: "DE", Continent: "eu"},
		Prices: auction.Prices{Bronze: 1_000_000},
		Policy: auction.Policy{Workloads: []string{"batch"}, PreemptNotice: 60},
	}
}

func signed(t *testing.T, o *auction.Offer, key crypto.PrivKey) []byte {
	t.Helper()
	so, err := auction.SignOffer(o, key)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := so.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestHostileOffersNeverEnterABookAndCostTheSenderScore connects a rogue
// host that speaks the protocol but publishes forged, oversized, expired,
// replayed and garbage offers straight onto the topic, bypassing its own
// validation; the honest nodes must keep every one out of their books and
// score the rogue down.
func TestHostileOffersNeverEnterABookAndCostTheSenderScore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	other, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	rogue, err := p2p.New(ctx, p2p.Identity(key), p2p.Network("local"), p2p.DisableNATServices(),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DHTMode("server"))
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	for _, n := range c.Nodes() {
		if err := rogue.Connect(ctx, peer.AddrInfo{ID: n.Host().ID(), Addrs: n.Host().LibP2P().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	topic, err := rogue.Join("offers/eu/1", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	id := rogue.ID()
	now := time.Now()
	time.Sleep(1500 * time.Millisecond) // let the rogue into the honest nodes' meshes

	// One valid offer first, so that a replay has something to replay.
	good := signed(t, rogueOffer(t, id, now, 10*time.Minute, 5), key)
	if err := topic.Publish(ctx, good); err != nil {
		t.Fatal(err)
	}
	waitBooks(t, c, 3*time.Second, "the rogue's valid offer", func(b map[string]bool) bool { return b[id.String()] })

	forgedBody := rogueOffer(t, id, now, 10*time.Minute, 9)
	// The provider field names the rogue; the signature is by another key.
	body, err := forgedBody.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := other.Sign(append([]byte(auction.OfferDomain), body...))
	wrongKey, _ := (&auction.SignedOffer{Body: body, Sig: sig}).Marshal()
	expired := signed(t, rogueOffer(t, id, now.Add(-2*time.Hour), time.Hour, 11), key)
	replay := signed(t, rogueOffer(t, id, now, 10*time.Minute, 3), key)
	bigRaw, _ := (&auction.SignedOffer{Body: bytes.Repeat([]byte{0xa0}, 70<<10), Sig: make([]byte, 64)}).Marshal()
	for name, msg := range map[string][]byte{
		"forged": wrongKey, "oversized": bigRaw, "expired": expired, "replayed": replay,
		"garbage": []byte("\xff\x00not cbor at all"),
	} {
		if err := topic.Publish(ctx, msg); err != nil {
			t.Fatalf("publish %s: %v", name, err)
		}
	}
	time.Sleep(2 * time.Second)
	for i := range c.Nodes() {
		cl, _ := c.Client(i)
		var res struct {
			Offers []struct {
				Provider string `json:"provider"`
				Seq      uint64 `json:"seq"`
			} `json:"offers"`
		}
		if err := cl.Call(ctx, "market_offers", map[string]any{"query": "provider=" + id.String()}, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Offers) != 1 || res.Offers[0].Seq != 5 {
			t.Errorf("node %d holds %+v for the rogue; want exactly its valid offer, seq 5", i, res.Offers)
		}
	}
	// Scores are inspected once a second; every honest node that received
	// the junk directly must have scored the rogue below zero.
	deadline := time.Now().Add(5 * time.Second)
	for i, n := range c.Nodes() {
		for {
			s, ok := n.Host().PeerScores()[id]
			if ok && s < 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d scores the rogue %v (known %v), want < 0", i, s, ok)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
