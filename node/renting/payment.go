package renting

import (
	"context"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// Payment per interval: before each billing interval the renter signs a
// cumulative voucher for it and sends it up the job stream; the provider
// pauses the container when no voucher covers the time run plus a grace,
// resumes when one arrives, and stops the job when its patience runs out.
// Neither side risks more than one interval plus the grace. Billing starts
// when the job may start (the lease's window), never at the award: a gold
// reservation for a window 90 s ahead pays nothing while it waits. A job
// that ends early pays for what ran, to the second: the provider's
// settlement charges that much of the best voucher and refunds the rest
// (auction/provider.Charge). This is the renter's half; the provider's
// (its meter and settlement) is node/providing's.

// payLoop signs voucher n at the start of interval n, until ctx ends or
// (a fault-injection knob) after stopAfter vouchers. When and how much is
// renter.Pacing's decision: the first interval starts at the lease's
// window start (l.Start), not before: until then it only waits, and a ctx
// that ends meanwhile sends nothing.
func payLoop(ctx context.Context, s io.Writer, key crypto.PrivKey, l *auction.Lease, leaseCID string, first uint64, stopAfter int, paid func(n uint64, total auction.Credits, raw []byte)) {
	pace := renter.PacingOf(l)
	if wait := pace.FirstWait(time.Now()); wait > 0 {
		w := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			w.Stop()
			return
		case <-w.C:
		}
	}
	t := time.NewTicker(pace.Interval)
	defer t.Stop()
	for n := first; ; n++ {
		if stopAfter > 0 && n > uint64(stopAfter) {
			return
		}
		if ctx.Err() != nil {
			return
		}
		v := &ledger.Voucher{Lease: leaseCID, Lane: 0, Nonce: n, Total: pace.Total(n), Renter: l.Renter, Provider: l.Provider}
		sv, err := ledger.SignVoucher(v, key)
		if err != nil {
			return
		}
		raw, err := sv.Marshal()
		if err != nil || wire.Write(s, wire.RenterMsg{Voucher: raw}) != nil {
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

// recordCharge records in j the provider's charge for its run, ended at
// end by this node's clock, against this node's own bound
// (renter.ChargeBound, from when it sent the start). It returns a note
// when the charge is more than that bound, or below zero (no charge can
// be): the figure is kept, shown as disputed (renter.CheckCharge).
func recordCharge(j *JobRecord, charged auction.Credits, end time.Time) string {
	l, _, err := auction.DecodeLeaseUnverified(j.Lease) // verified when it was co-signed
	if err != nil {
		return ""
	}
	var sent time.Time
	if j.StartSent != nil {
		sent = *j.StartSent
	}
	j.Charged, j.ChargeBound = &charged, renter.ChargeBound(l, sent, end, j.Paid)
	c := renter.CheckCharge(charged, j.Paid, j.ChargeBound)
	j.ChargeDisputed, j.Refunded = c.Disputed, c.Refunded
	return c.Why
}
