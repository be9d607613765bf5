package node

import (
	"log/slog"
	"sync/atomic"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/replicate"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// feeds is the node's handle on the replication of its ledger
// (node/replicate), under the names the provider's and renter's code use:
// record, and the counterparty filter.
type feeds struct {
	*replicate.Feeds
	// counterparty is replicate.Feeds.Counterparty: the peers this node
	// deals with, whose new feeds are fetched past the foreign feed cap.
	counterparty *atomic.Pointer[func(author string) bool]
}

func newFeeds(h *p2p.Host, st *ledger.Store, key crypto.PrivKey, log *slog.Logger) *feeds {
	r := replicate.New(h, st, key, log)
	return &feeds{Feeds: r, counterparty: &r.Counterparty}
}

// record appends to our feed and logs, rather than fails, when it cannot:
// the market must not stop because the journal did.
func (f *feeds) record(typ string, payload []byte) {
	if f == nil {
		return
	}
	f.Feeds.Record(typ, payload)
}

// recordAll is record for several entries of one type, in one
// transaction: the provider's group commit of awards.
func (f *feeds) recordAll(typ string, payloads [][]byte) {
	if f == nil {
		return
	}
	f.Feeds.RecordAll(typ, payloads)
}
