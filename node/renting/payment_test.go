package renting

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// voucherTape is a job stream's renter side, as payLoop writes it: the
// vouchers and when each was written.
type voucherTape struct {
	mu  sync.Mutex
	buf bytes.Buffer
	at  []time.Time
}

func (v *voucherTape) Write(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.at = append(v.at, time.Now())
	return v.buf.Write(p)
}

// vouchers decodes what was written so far.
func (v *voucherTape) vouchers(t *testing.T) (out []*ledger.Voucher, at []time.Time) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	r := bytes.NewReader(v.buf.Bytes())
	for r.Len() > 0 {
		var msg wire.RenterMsg
		if err := wire.Read(r, wire.MaxRequestFrame, &msg); err != nil {
			t.Fatal(err)
		}
		vc, _, err := ledger.DecodeSignedVoucher(msg.Voucher)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vc)
	}
	return out, append([]time.Time(nil), v.at...)
}

// Billing starts when the job may start: for a reservation whose window
// opens 90 s after the award, payLoop sends nothing for 90 s, voucher 1 at
// the window's start and voucher 2 an interval later; a renter that gives
// up before the window paid nothing. In virtual time, so the instants are
// exact.
func TestRefundPayLoopSendsNothingBeforeTheWindow(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	renter, _ := peer.IDFromPrivateKey(key)
	provider, _ := peer.IDFromPrivateKey(pkey)
	lease := func(start time.Time) *auction.Lease {
		return &auction.Lease{Renter: renter.String(), Provider: provider.String(), Tier: auction.Gold, Price: 3_600_000, GPUs: 1,
			BillingSec: 60, Start: start.Unix(), End: start.Add(time.Hour).Unix()}
	}
	cid := wire.LeaseCID(signedLeaseFor(t, lease(time.Now()))) // a voucher names a real lease CID
	synctest.Test(t, func(t *testing.T) {
		start := time.Now().Add(90 * time.Second) // a whole second: the bubble starts at midnight
		l := lease(start)
		var tape voucherTape
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			payLoop(ctx, &tape, key, l, cid, 1, 0, func(uint64, auction.Credits, []byte) {})
		}()
		time.Sleep(time.Until(start) - time.Nanosecond)
		synctest.Wait()
		if vs, _ := tape.vouchers(t); len(vs) != 0 {
			t.Fatalf("%d voucher(s) sent before the window's start", len(vs))
		}
		time.Sleep(time.Nanosecond + 60*time.Second)
		synctest.Wait()
		vs, at := tape.vouchers(t)
		if len(vs) != 2 || !at[0].Equal(start) || !at[1].Equal(start.Add(time.Minute)) {
			t.Fatalf("vouchers %v at %v; want 2, at the window's start and a minute later (%v)", vs, at, start)
		}
		if vs[0].Nonce != 1 || vs[0].Total != 60_000 || vs[1].Nonce != 2 || vs[1].Total != 120_000 {
			t.Fatalf("vouchers %+v %+v: want cumulative totals of one interval each", vs[0], vs[1])
		}
		cancel()
		<-done
	})
	synctest.Test(t, func(t *testing.T) {
		start := time.Now().Add(90 * time.Second)
		var tape voucherTape
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			payLoop(ctx, &tape, key, lease(start), cid, 1, 0, func(uint64, auction.Credits, []byte) {})
		}()
		time.Sleep(80 * time.Second)
		cancel() // the renter cancels the reservation before its window
		<-done
		if vs, _ := tape.vouchers(t); len(vs) != 0 {
			t.Fatalf("%d voucher(s) sent for a reservation cancelled before its window", len(vs))
		}
	})
	// A window already open is paid at once.
	synctest.Test(t, func(t *testing.T) {
		var tape voucherTape
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go payLoop(ctx, &tape, key, lease(time.Now().Add(-time.Minute)), cid, 1, 0, func(uint64, auction.Credits, []byte) {})
		synctest.Wait()
		if vs, at := tape.vouchers(t); len(vs) != 1 || !at[0].Equal(time.Now()) {
			t.Fatalf("an open window: vouchers %v at %v", vs, at)
		}
	})
}

// The renter records the provider's charge against its own bound
// (renter.ChargeBound, tested in auction/renter): a charge above it is
// recorded but disputed, one within it refunds the rest of the vouchers.
func TestRefundRenterChecksTheProvidersCharge(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &auction.Lease{Renter: "r", Provider: "p", Price: 500_000, GPUs: 1, BillingSec: 300, Start: t0.Unix(), End: t0.Add(time.Hour).Unix()}
	per := sched.IntervalPrice(l) // 41,666
	sent := t0.Add(5 * time.Second)
	rec := func(charged auction.Credits) (JobRecord, string) {
		raw := signedLeaseFor(t, l)
		j := JobRecord{Lease: raw, Paid: per, StartSent: &sent}
		note := recordCharge(&j, charged, sent.Add(2500*time.Millisecond))
		return j, note
	}
	if j, note := rec(139); note != "" || j.ChargeDisputed || *j.Charged != 139 || j.Refunded != per-139 || j.ChargeBound != 417 {
		t.Fatalf("an honest charge: %+v, note %q", j, note)
	}
	for _, c := range []struct {
		charged   auction.Credits
		says, not string
	}{
		{418, "more than the 0.000417", "negative"},
		{-1, "a negative charge, which is invalid", "more than"},
	} {
		j, note := rec(c.charged)
		if !strings.Contains(note, c.says) || strings.Contains(note, c.not) || !j.ChargeDisputed || *j.Charged != c.charged || j.Refunded != 0 {
			t.Fatalf("a charge of %d: %+v, note %q: want it disputed, saying %q", c.charged, j, note, c.says)
		}
	}
}

// signedLeaseFor is l signed by fresh keys for both parties, as a job
// record holds it.
func signedLeaseFor(t *testing.T, l *auction.Lease) []byte {
	t.Helper()
	rk, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	pk, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	l2 := *l
	rid, _ := peer.IDFromPrivateKey(rk)
	pid, _ := peer.IDFromPrivateKey(pk)
	l2.Renter, l2.Provider, l2.Bid, l2.Network, l2.JobID, l2.Tier = rid.String(), pid.String(), []byte("bid"), repo.NetworkLocal, "j", auction.Silver
	sl, err := auction.ProposeLease(&l2, rk)
	if err != nil {
		t.Fatal(err)
	}
	if err := sl.CounterSign(pk); err != nil {
		t.Fatal(err)
	}
	raw, err := sl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
