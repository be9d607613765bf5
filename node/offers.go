package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// The offer side lives in node/offers; market is node's name for its
// offer book.
type market = offers.Market

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
