package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// provider is this node's offer publisher, with the store its leases share.
type provider struct {
	*offers.Publisher
	store *store.Store
}

func newProvider(bg context.Context, m *offers.Market, store *store.Store, key crypto.PrivKey, ttl time.Duration, log *slog.Logger) (*provider, error) {
	p, err := offers.NewPublisher(bg, m, offerStore{store}, key, ttl, log)
	if err != nil {
		return nil, err
	}
	return &provider{Publisher: p, store: store}, nil
}

// offerStore keeps the publisher's settings and sequence number in the
// node's store, under offer/state.
type offerStore struct{ st *store.Store }

const offerStateKey = "state"

func (s offerStore) LoadState(v *offers.State) error {
	if err := s.st.Get(store.BucketOffer, offerStateKey, v); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

func (s offerStore) SaveState(v offers.State) error {
	return s.st.Update(func(tx *store.Tx) error { return tx.Put(store.BucketOffer, offerStateKey, v) })
}
