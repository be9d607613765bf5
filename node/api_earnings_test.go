package node

import (
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// feedKit signs leases, vouchers and settlements as a renter and a
// provider would, and makes the entries of the feed of one of them.
type feedKit struct {
	t                *testing.T
	renterKey        crypto.PrivKey
	renter, provider string
	providerKey      crypto.PrivKey
}

func newFeedKit(t *testing.T) *feedKit {
	k := &feedKit{t: t}
	var err error
	k.renterKey, _, err = crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k.providerKey, _, err = crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := peer.IDFromPrivateKey(k.renterKey)
	p, _ := peer.IDFromPrivateKey(k.providerKey)
	k.renter, k.provider = r.String(), p.String()
	return k
}

// lease is a co-signed lease of gpus GPUs at 0.5 credits per GPU-hour
// over [start, end), as a lease entry, and its CID.
func (k *feedKit) lease(job string, start, end time.Time, gpus int) (*ledger.Entry, string, auction.Lease) {
	l := auction.Lease{JobID: job, Network: "local", Renter: k.renter, Provider: k.provider, Tier: auction.Silver, Price: 500_000,
		GPUs: gpus, Start: start.Unix(), End: end.Unix(), BillingSec: 60, Bid: []byte{1}}
	sl, err := auction.ProposeLease(&l, k.renterKey)
	if err != nil {
		k.t.Fatal(err)
	}
	if err := sl.CounterSign(k.providerKey); err != nil {
		k.t.Fatal(err)
	}
	raw, err := sl.Marshal()
	if err != nil {
		k.t.Fatal(err)
	}
	return &ledger.Entry{Type: ledger.TypeLease, Time: start.Unix(), Payload: raw}, sl.CID().String(), l
}

// voucher is the renter's signed voucher of total on lease.
func (k *feedKit) voucher(lease string, total auction.Credits) []byte {
	sv, err := ledger.SignVoucher(&ledger.Voucher{Lease: lease, Nonce: 1, Total: total, Renter: k.renter, Provider: k.provider}, k.renterKey)
	if err != nil {
		k.t.Fatal(err)
	}
	raw, err := sv.Marshal()
	if err != nil {
		k.t.Fatal(err)
	}
	return raw
}

// settlement is the provider's settlement at at: charged of the voucher's
// total, the voucher signed for voucherTotal (not total: unproven).
func (k *feedKit) settlement(lease string, at time.Time, total, charged, voucherTotal auction.Credits) *ledger.Entry {
	b, err := json.Marshal(ledger.Settlement{Lease: lease, Renter: k.renter, Total: total, Voucher: k.voucher(lease, voucherTotal),
		Charged: &charged, Refund: total - charged})
	if err != nil {
		k.t.Fatal(err)
	}
	return &ledger.Entry{Type: ledger.TypeSettlement, Time: at.Unix(), Payload: b}
}

// A lease's GPU-time counts on the days it ran, as offered time does, and
// from its run, not from its charge (capped here by the vouchers): a
// settled lease 23:00 to its settlement at 01:00 and one running since
// 23:30 each count on both days, and no day reads over 100%. Booked on
// the settlement's day and on today, the second day had 14400 of 10800
// offered GPU-seconds leased.
func TestEarningsSpreadOverTheDaysLeasesRan(t *testing.T) {
	k := newFeedKit(t)
	at := func(day, h, m int) time.Time { return time.Date(2026, 3, day, h, m, 0, 0, time.UTC) }
	f := earnings.NewOwnFeed(k.provider)
	le, a, _ := k.lease("a", at(9, 23, 0), at(10, 3, 0), 1)
	f.Add(le)
	f.Add(k.settlement(a, at(10, 1, 0), 600_000, 600_000, 600_000)) // 1.2 GPU-hours of vouchers for 2 hours run
	_, _, lb := k.lease("b", at(9, 23, 30), at(10, 5, 0), 1)
	running := []sched.Info{{Lease: lb, State: sched.Started, Ran: 2 * time.Hour}}
	offered := map[string]earnings.OfferedDay{ // 2 GPUs from 22:00 to 01:30
		"2026-03-09": {GPUSeconds: 2 * 2 * 3600, From: at(9, 22, 0).Unix()},
		"2026-03-10": {GPUSeconds: 2 * 5400, From: at(10, 0, 0).Unix()},
	}
	now := at(10, 1, 30)
	res := earnings.Of(f, running, offered, earnings.PeriodParams{Days: 2}.From(now), now)

	want := []struct {
		day            string
		leased, fillBP int64
	}{{"2026-03-09", 3600 + 1800, 3750}, {"2026-03-10", 3600 + 5400, 8333}}
	if len(res.Days) != len(want) {
		t.Fatalf("days: %+v", res.Days)
	}
	for i, w := range want {
		d := res.Days[i]
		if d.Day != w.day || d.LeasedGPUS != w.leased || d.FillBP == nil || *d.FillBP != w.fillBP || *d.FillBP > 10000 {
			t.Errorf("day %d: %+v (fill %v), want %s leased %d, fill %d bp", i, d, d.FillBP, w.day, w.leased, w.fillBP)
		}
	}
	if len(res.Jobs) != 2 || res.Jobs[0].GPUSeconds != 7200 || res.Jobs[1].GPUSeconds != 7200 || res.Earned != 600_000 || res.Days[1].Earned != 600_000 {
		t.Fatalf("jobs %+v, earned %d: want 2 GPU-hours each, 0.6 credits on the 10th", res.Jobs, res.Earned)
	}
	if res.LeasedGPUS != 14400 || res.OfferedGPUS != 25200 || res.FillBP == nil || *res.FillBP != 5714 {
		t.Fatalf("period: leased %d, offered %d, fill %v", res.LeasedGPUS, res.OfferedGPUS, res.FillBP)
	}
}

// A lease journaled twice is one lease, a lease settled twice counts its
// last settlement, and a settlement its renter's voucher does not prove
// counts nothing: the balance is what every node computes from the feed.
func TestOwnFeedOneLeaseOneSettlement(t *testing.T) {
	k := newFeedKit(t)
	t0 := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	f := earnings.NewOwnFeed(k.provider)
	le, a, _ := k.lease("a", t0, t0.Add(time.Hour), 1)
	f.Add(le)
	f.Add(le)
	f.Add(k.settlement(a, t0.Add(10*time.Minute), 600_000, 300_000, 600_000))
	f.Add(k.settlement(a, t0.Add(20*time.Minute), 600_000, 400_000, 600_000))
	lc, c, _ := k.lease("c", t0, t0.Add(time.Hour), 1)
	f.Add(lc)
	f.Add(k.settlement(c, t0.Add(30*time.Minute), 500_000, 500_000, 400_000)) // the voucher is for less
	if len(f.LeaseOrder) != 2 || f.LeaseOrder[0] != a || f.LeaseOrder[1] != c {
		t.Fatalf("lease order: %v", f.LeaseOrder)
	}
	if len(f.Settlements) != 1 || f.Settlements[0].S.Paid() != 400_000 {
		t.Fatalf("settlements: %+v", f.Settlements)
	}
	if b := (&Node{}).balanceOf(f); b.Earned != 400_000 || b.ByDay["2026-03-09"] != 400_000 || b.Balance != FaucetCredits+400_000 {
		t.Fatalf("balance: %+v", b)
	}

	// The renter's side: its lease journaled twice is spent on once.
	r := earnings.NewOwnFeed(k.renter)
	r.Add(le)
	r.Add(le)
	o, err := json.Marshal(ledger.Outcome{Lease: a, Provider: k.provider, Result: ledger.OutcomeCompleted, Voucher: k.voucher(a, 250_000)})
	if err != nil {
		t.Fatal(err)
	}
	r.Add(&ledger.Entry{Type: ledger.TypeOutcome, Time: t0.Add(time.Hour).Unix(), Payload: o})
	if b := (&Node{}).balanceOf(r); b.Spent != 250_000 || len(b.SpentFor) != 1 || b.Balance != FaucetCredits-250_000 {
		t.Fatalf("renter's balance: %+v", b)
	}
}

// Each GPU's state is looked up by its index, not its position: GPUs 2
// and 5, the second offered and leased, the first withdrawn.
func TestGPUStatusesByIndex(t *testing.T) {
	av := attest.Availability{
		Inventory: attest.Inventory{GPUs: []attest.GPU{{Index: 2, Model: "RTX4090"}, {Index: 5, Model: "RTX4090"}}},
		Available: []int{5},
		Withdrawn: map[int]string{2: "over 80°C"},
		Stop:      map[int]string{5: "over 90°C"},
		Faults:    map[int]string{2: "Xid 79"},
	}
	got := gpuStatuses(av, true, map[int]*GPULease{5: {JobID: "j"}})
	if len(got) != 2 {
		t.Fatalf("%+v", got)
	}
	if g := got[0]; g.Index != 2 || g.Offered || g.Withdrawn != "over 80°C" || g.Stopping != "" || g.Fault != "Xid 79" || g.Lease != nil {
		t.Errorf("GPU 2: %+v", g)
	}
	if g := got[1]; g.Index != 5 || !g.Offered || g.Withdrawn != "" || g.Stopping != "over 90°C" || g.Fault != "" || g.Lease == nil || g.Lease.JobID != "j" {
		t.Errorf("GPU 5: %+v", g)
	}
	if got := gpuStatuses(av, false, nil); got[1].Offered {
		t.Error("offered while the offer is not")
	}
}
