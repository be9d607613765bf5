package trust

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// BenchmarkReputationFromLedger is a node's whole reputation pass over a
// real store: 10,000 peers (1,000 providers, 9,000 renters) and 100,002
// entries (a third co-signed leases, a third renter outcomes carrying a
// voucher, a third provider settlements), with the fraud checks (every
// lease against the other leases of its GPU), ratings of providers and
// renters, and personalised EigenTrust.
//
// cold is the first pass after a start (every entry read, every voucher's
// signature checked once); warm is a later pass after 1,000 new entries
// arrived (each pass folds in only what is new).
//
//	go test -run '^$' -bench ReputationFromLedger -benchtime 3x ./ledger/trust
func BenchmarkReputationFromLedger(b *testing.B) {
	fx := newReputationFixture(b, 1000, 9000)
	fx.leases(b, 33334)
	check := func(b *testing.B, sc map[string]float64, ev map[string]*Evidence) {
		if len(sc) == 0 || len(ev) < 10000 {
			b.Fatalf("%d scores, %d peers with evidence", len(sc), len(ev))
		}
	}
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			v := &View{st: fx.st, self: fx.self}
			b.StartTimer()
			sc, ev, _ := v.compute()
			check(b, sc, ev)
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
	})
	b.Run("warm", func(b *testing.B) {
		v := &View{st: fx.st, self: fx.self}
		v.compute()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fx.leases(b, 334) // 1,002 new entries
			b.StartTimer()
			sc, ev, _ := v.compute()
			check(b, sc, ev)
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
	})
}

// repFixture writes leases between providers and renters (each
// provider's GPU leased back to back, never twice at once) into a store,
// in batches so that set-up takes seconds, not minutes. self is the first
// renter.
type repFixture struct {
	st    *ledger.Store
	self  string
	ps    []actor
	rs    []actor
	heads map[string]*ledger.Entry
	n     int // leases written so far
	t0    time.Time
}

func newReputationFixture(b *testing.B, providers, renters int) *repFixture {
	b.Helper()
	st, err := ledger.OpenStore(filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	fx := &repFixture{st: st, heads: map[string]*ledger.Entry{}, t0: time.Now().Add(-90 * 24 * time.Hour)}
	for range providers {
		fx.ps = append(fx.ps, newActor(b))
	}
	for range renters {
		fx.rs = append(fx.rs, newActor(b))
	}
	fx.self = fx.rs[0].ID
	return fx
}

// leases adds n leases, each with the renter's lease and outcome entries
// and the provider's settlement.
func (fx *repFixture) leases(b *testing.B, n int) {
	b.Helper()
	var batch []*ledger.SignedEntry
	flush := func() {
		errs, err := fx.st.AppendBatch(batch)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				b.Fatal(e)
			}
		}
		batch = batch[:0]
	}
	add := func(a actor, typ string, payload []byte, at time.Time) {
		e, se, err := ledger.NewEntry(a.Key, fx.heads[a.ID], typ, payload, at)
		if err != nil {
			b.Fatal(err)
		}
		fx.heads[a.ID] = e
		batch = append(batch, se)
		if len(batch) == 1000 {
			flush()
		}
	}
	providers, renters := len(fx.ps), len(fx.rs)
	for end := fx.n + n; fx.n < end; fx.n++ {
		i := fx.n
		p, r := fx.ps[i%providers], fx.rs[i%renters]
		start := fx.t0.Add(time.Duration(i/providers) * 2 * time.Hour)
		l := &auction.Lease{JobID: fmt.Sprint("job-", i), Network: "bench", Renter: r.ID, Provider: p.ID, Tier: auction.Silver,
			Price: 500_000, GPUs: 1, Start: start.Unix(), End: start.Add(time.Hour).Unix(), BillingSec: 300,
			Bid: []byte("bid"), GPUUUIDHash: []string{"gpu0"}}
		sl, err := auction.ProposeLease(l, r.Key)
		if err != nil {
			b.Fatal(err)
		}
		if err := sl.CounterSign(p.Key); err != nil {
			b.Fatal(err)
		}
		raw, _ := sl.Marshal()
		cid := sl.CID().String()
		sv, err := ledger.SignVoucher(&ledger.Voucher{Lease: cid, Nonce: 1, Total: 500_000, Renter: r.ID, Provider: p.ID}, r.Key)
		if err != nil {
			b.Fatal(err)
		}
		vraw, _ := sv.Marshal()
		result := ledger.OutcomeCompleted
		if i%10 == 0 {
			result = ledger.OutcomeAbandoned
		}
		out, _ := json.Marshal(ledger.Outcome{Lease: cid, Provider: p.ID, Result: result, Voucher: vraw})
		set, _ := json.Marshal(ledger.Settlement{Lease: cid, Renter: r.ID, Total: 500_000, Voucher: vraw})
		add(r, ledger.TypeLease, raw, start)
		add(r, ledger.TypeOutcome, out, start.Add(time.Hour))
		add(p, ledger.TypeSettlement, set, start.Add(time.Hour))
	}
	flush()
}
