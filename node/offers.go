package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// The offer side lives in node/offers; these names keep node's own files
// and its clients (cmd, testnet) reading as before.
type (
	// OfferSettings are the owner's choices about what to sell.
	OfferSettings = offers.Settings
	// OfferPatch is offer_set's parameter.
	OfferPatch = offers.Patch
	market     = offers.Market
)

// ParseCredits parses a decimal amount of credits ("0.45") exactly; see
// offers.ParseCredits.
func ParseCredits(s string) (auction.Credits, error) { return offers.ParseCredits(s) }

const (
	offerStreamProto = offers.StreamProto
	maxBookDefault   = offers.MaxBookDefault
)

var serveOffer = offers.ServeOffer

func newMarket(h *p2p.Host, maxOffers int, continents []string, log *slog.Logger) *market {
	return offers.NewMarket(h, maxOffers, continents, log)
}

// provider is this node's offer publisher, with the store its leases share.
type provider struct {
	*offers.Publisher
	store *Store
}

func newProvider(bg context.Context, m *market, store *Store, key crypto.PrivKey, ttl time.Duration, log *slog.Logger) (*provider, error) {
	p, err := offers.NewPublisher(bg, m, offerStore{store}, key, ttl, log)
	if err != nil {
		return nil, err
	}
	return &provider{Publisher: p, store: store}, nil
}

// offerStore keeps the publisher's settings and sequence number in the
// node's store, under offer/state.
type offerStore struct{ st *Store }

const offerStateKey = "state"

func (s offerStore) LoadState(v *offers.State) error {
	if err := s.st.Get(bucketOffer, offerStateKey, v); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

func (s offerStore) SaveState(v offers.State) error {
	return s.st.Update(func(tx *StoreTx) error { return tx.Put(bucketOffer, offerStateKey, v) })
}
