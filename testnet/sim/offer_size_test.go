package sim

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/gleaner-net/gleaner/attest"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The gossip bytes the simulator counts for an offer are those of the
// offer signed as node signs it: same envelope, same length, for an offer
// with bookings and without. A bad offer is refused, as SignOffer does.
func TestOfferWireSizeIsTheSignedOffers(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(key)
	s, _ := oneProvider(4)
	sp := s.Providers[0]
	gpus := make([]auction.GPU, sp.GPUs)
	for i := range gpus {
		gpus[i] = auction.GPU{Model: sp.Model, VRAMMiB: sp.VRAMMiB, ComputeCap: "8.0", UUIDHash: attest.UUIDHash(fmt.Sprintf("GPU-test-%d", i)), Simulated: true}
	}
	base := auction.Offer{Provider: id.String(), Network: simNetwork, Seq: 1, IssuedAt: 1000, ExpiresAt: 4600,
		GPUs: gpus, Host: auction.Host{CPUs: 32, MemoryMiB: 131072}, Region: auction.Region{Country: sp.Country, Continent: sp.Continent},
		Prices: sp.Floors, Policy: auction.Policy{Workloads: offerWorkloads, PreemptNotice: 60}}
	booked := base
	booked.Seq = 2
	booked.Booked = auction.NormalizeBookings([]auction.Booking{{Start: 1200, End: 3000, GPUs: 2}}, len(gpus), 1000, 4600)
	for name, o := range map[string]*auction.Offer{"free": &base, "booked": &booked} {
		so, err := auction.SignOffer(o, key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, err := so.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := offerWireSize(o)
		if err != nil || got != int64(len(raw)) {
			t.Fatalf("%s offer: counted %d bytes (%v), signed it is %d", name, got, err, len(raw))
		}
	}
	bad := base
	bad.GPUs = nil
	if _, err := offerWireSize(&bad); err == nil {
		t.Fatal("an offer with no GPUs was counted, not refused")
	}
}
