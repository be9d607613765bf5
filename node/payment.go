package node

import (
	"context"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
)

// Payment per interval: before each billing interval the renter signs a
// cumulative voucher for it and sends it up the job stream; the provider
// pauses the container when no voucher covers the time run plus a grace,
// resumes when one arrives, and stops the job when its patience runs out.
// Neither side risks more than one interval plus the grace.

// renterMsg is what a renter sends on a job stream after the start request.
type renterMsg struct {
	Voucher []byte `json:"voucher"`
}

// intervalPrice is what one billing interval of a lease costs.
func intervalPrice(l *auction.Lease) auction.Credits { return sched.IntervalPrice(l) }

// payLoop signs voucher n at the start of interval n, until ctx ends or
// (a fault-injection knob) after stopAfter vouchers.
func payLoop(ctx context.Context, s network.Stream, key crypto.PrivKey, l *auction.Lease, leaseCID string, first uint64, stopAfter int, paid func(n uint64, total auction.Credits, raw []byte)) {
	interval := time.Duration(l.BillingSec) * time.Second
	t := time.NewTicker(interval)
	defer t.Stop()
	per := intervalPrice(l)
	for n := first; ; n++ {
		if stopAfter > 0 && n > uint64(stopAfter) {
			return
		}
		v := &ledger.Voucher{Lease: leaseCID, Lane: 0, Nonce: n, Total: per * auction.Credits(n), Renter: l.Renter, Provider: l.Provider}
		sv, err := ledger.SignVoucher(v, key)
		if err != nil {
			return
		}
		raw, err := sv.Marshal()
		if err != nil || writeMsg(s, renterMsg{Voucher: raw}) != nil {
			return
		}
		paid(n, v.Total, raw)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// meter is the provider's view of what a run has been paid for.
type meter struct {
	mu    sync.Mutex // guards book and total
	lease *auction.Lease
	cid   string
	book  *ledger.VoucherBook
	total auction.Credits
	best  []byte // the best voucher's wire bytes, for the settlement entry
}

func newMeter(l *auction.Lease, cid string) *meter {
	return &meter{lease: l, cid: cid, book: ledger.NewVoucherBook()}
}

// readVouchers takes vouchers from the renter's side of the stream until it
// closes; a voucher for another lease or party is ignored.
func (m *meter) readVouchers(s network.Stream, onPaid func(total auction.Credits)) {
	for {
		var msg renterMsg
		if err := readMsg(s, maxRequestFrame, &msg); err != nil {
			return
		}
		v, sv, err := ledger.DecodeSignedVoucher(msg.Voucher)
		if err != nil || v.Lease != m.cid || v.Renter != m.lease.Renter || v.Provider != m.lease.Provider {
			continue
		}
		m.mu.Lock()
		better := false
		if _, err := m.book.Accept(sv); err == nil && v.Total > m.total {
			m.total, m.best, better = v.Total, msg.Voucher, true
		}
		total := m.total
		m.mu.Unlock()
		if better && onPaid != nil {
			onPaid(total)
		}
	}
}

func (m *meter) settled() (auction.Credits, []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total, m.best
}
