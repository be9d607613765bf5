package trust

import (
	"github.com/gleaner-net/gleaner/ledger/ledgertest"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// ledgerWorld is a real ledger store holding the feeds of a few actors
// (ledger/ledgertest), with this package's own helpers on top.
type ledgerWorld struct{ *ledgertest.World }

type actor = ledgertest.Actor

var newActor = ledgertest.NewActor

func newLedgerWorld(t *testing.T) *ledgerWorld { return &ledgerWorld{ledgertest.NewWorld(t)} }

func (w *ledgerWorld) append(a actor, typ string, payload []byte, at time.Time) {
	w.T.Helper()
	w.Append(a, typ, payload, at)
}

func (w *ledgerWorld) lease(r, p actor, job string, tier auction.Tier, start time.Time, dur time.Duration, gpus ...string) (raw []byte, cid string) {
	w.T.Helper()
	l := &auction.Lease{JobID: job, Network: "test", Renter: r.ID, Provider: p.ID, Tier: tier,
		Price: 3_600_000, GPUs: len(gpus), Start: start.Unix(), End: start.Add(dur).Unix(),
		BillingSec: 60, Bid: []byte("bid"), GPUUUIDHash: gpus}
	sl, err := auction.ProposeLease(l, r.Key)
	if err != nil {
		w.T.Fatal(err)
	}
	if err := sl.CounterSign(p.Key); err != nil {
		w.T.Fatal(err)
	}
	raw, _ = sl.Marshal()
	// Both sides journal the co-signed lease, as the node does.
	w.append(p, ledger.TypeLease, raw, start)
	w.append(r, ledger.TypeLease, raw, start)
	return raw, sl.CID().String()
}

// memJournal counts what a reputation view hands to its journal; it
// refuses the first refuse entries, as a full journal does.
type memJournal struct {
	mu      sync.Mutex
	entries map[string]int
	refuse  int
	offered int
}

func (j *memJournal) record(typ string, payload []byte) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.offered++
	if j.refuse > 0 {
		j.refuse--
		return false
	}
	if j.entries == nil {
		j.entries = map[string]int{}
	}
	j.entries[typ]++
	return true
}

func (j *memJournal) count(typ string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.entries[typ]
}

func voucherFor(t *testing.T, r, p actor, lease string, total auction.Credits) []byte {
	t.Helper()
	sv, err := ledger.SignVoucher(&ledger.Voucher{Lease: lease, Lane: 0, Nonce: 1, Total: total, Renter: r.ID, Provider: p.ID}, r.Key)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := sv.Marshal()
	return raw
}
