package trust

import (
	"crypto/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ledgerWorld is a real ledger store holding the feeds of a few actors,
// each appended with the actor's own key, as replication would leave them.
type ledgerWorld struct {
	t     *testing.T
	st    *ledger.Store
	heads map[string]*ledger.Entry
}

type actor struct {
	key crypto.PrivKey
	id  string
}

func newActor(t testing.TB) actor {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return actor{k, id.String()}
}

func newLedgerWorld(t *testing.T) *ledgerWorld {
	st, err := ledger.OpenStore(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &ledgerWorld{t: t, st: st, heads: map[string]*ledger.Entry{}}
}

func (w *ledgerWorld) append(a actor, typ string, payload []byte, at time.Time) {
	w.t.Helper()
	e, se, err := ledger.NewEntry(a.key, w.heads[a.id], typ, payload, at)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.st.Append(se); err != nil {
		w.t.Fatal(err)
	}
	w.heads[a.id] = e
}

func (w *ledgerWorld) lease(r, p actor, job string, tier auction.Tier, start time.Time, dur time.Duration, gpus ...string) (raw []byte, cid string) {
	w.t.Helper()
	l := &auction.Lease{JobID: job, Network: "test", Renter: r.id, Provider: p.id, Tier: tier,
		Price: 3_600_000, GPUs: len(gpus), Start: start.Unix(), End: start.Add(dur).Unix(),
		BillingSec: 60, Bid: []byte("bid"), GPUUUIDHash: gpus}
	sl, err := auction.ProposeLease(l, r.key)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := sl.CounterSign(p.key); err != nil {
		w.t.Fatal(err)
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
	sv, err := ledger.SignVoucher(&ledger.Voucher{Lease: lease, Lane: 0, Nonce: 1, Total: total, Renter: r.id, Provider: p.id}, r.key)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := sv.Marshal()
	return raw
}
