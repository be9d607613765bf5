package node

import (
	"context"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
)

// Payment per interval: before each billing interval the renter signs a
// cumulative voucher for it and sends it up the job stream; the provider
// pauses the container when no voucher covers the time run plus a grace,
// resumes when one arrives, and stops the job when its patience runs out.
// Neither side risks more than one interval plus the grace. This is the
// renter's half; the provider's (its meter) is node/providing's.

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
		if err != nil || writeMsg(s, wire.RenterMsg{Voucher: raw}) != nil {
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
