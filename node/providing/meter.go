package providing

import (
	"sync"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
)

// Payment per interval, the provider's half: before each billing interval
// the renter signs a cumulative voucher for it and sends it up the job
// stream; the meter keeps the best, and the scheduler pauses, resumes or
// stops the run by what it covers (see run).

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
		var msg wire.RenterMsg
		if err := wire.Read(s, wire.MaxRequestFrame, &msg); err != nil {
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
