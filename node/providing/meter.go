package providing

import (
	"io"
	"sync"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
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
// onPaid is told each better voucher: its total and its wire bytes.
func (m *meter) readVouchers(s io.Reader, onPaid func(total auction.Credits, voucher []byte)) {
	for {
		var msg wire.RenterMsg
		if err := wire.Read(s, wire.MaxRequestFrame, &msg); err != nil {
			return
		}
		if total, better := m.take(msg.Voucher); better && onPaid != nil {
			onPaid(total, msg.Voucher)
		}
	}
}

// take counts a voucher's wire bytes if they are a valid voucher of this
// lease's renter to its provider; better: it is the best so far.
func (m *meter) take(raw []byte) (total auction.Credits, better bool) {
	v, sv, err := ledger.DecodeSignedVoucher(raw)
	if err != nil || v.Lease != m.cid || v.Renter != m.lease.Renter || v.Provider != m.lease.Provider {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.book.Accept(sv); err == nil && v.Total > m.total {
		m.total, m.best, better = v.Total, raw, true
	}
	return m.total, better
}

func (m *meter) settled() (auction.Credits, []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total, m.best
}
