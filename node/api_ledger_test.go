package node

import (
	"testing"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
)

func TestHistoryLimitIsNeverChangedSilently(t *testing.T) {
	for _, bad := range []int{-1, 1001, 5000} {
		if err := (HistoryParams{Limit: bad}).Validate(); err == nil {
			t.Errorf("limit %d accepted", bad)
		}
	}
	for _, ok := range []int{0, 1, 1000} {
		if err := (HistoryParams{Limit: ok}).Validate(); err != nil {
			t.Errorf("limit %d refused: %v", ok, err)
		}
	}
}

// A lease entry's payload is CBOR, so the history shows it decoded: the
// lease (job, parties, GPUs) and the CID its settlement cites, which is
// what anyone auditing a provider's feed (the fault soak, say) reads.
func TestHistoryShowsLeaseEntriesDecoded(t *testing.T) {
	r := newHostileRig(t, Options{}, nil)
	raw := r.lease("audited", hostileSpec("audited", "1s"))
	var got *EntryView
	err := r.prov.ledger.Walk(r.prov.Host().ID().String(), 0, 1<<62, func(e *ledger.Entry, se *ledger.SignedEntry) error {
		if e.Type == ledger.TypeLease {
			v := viewEntry(e, se)
			got = &v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Lease == nil {
		t.Fatalf("the provider's lease entry: %+v", got)
	}
	if got.Lease.JobID != "audited" || got.LeaseCID != wire.LeaseCID(raw) || len(got.Lease.GPUUUIDHash) != 1 || got.Payload != nil {
		t.Fatalf("decoded lease: job %q, cid %q (want %q), GPUs %v, raw payload %d bytes",
			got.Lease.JobID, got.LeaseCID, wire.LeaseCID(raw), got.Lease.GPUUUIDHash, len(got.Payload))
	}
}
