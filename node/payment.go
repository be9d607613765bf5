package node

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
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

// intervalPrice is what one billing interval of a lease costs.
func intervalPrice(l *auction.Lease) auction.Credits { return sched.IntervalPrice(l) }

// payLoop signs voucher n at the start of interval n, until ctx ends or
// (a fault-injection knob) after stopAfter vouchers. The first interval
// starts at the lease's window start (l.Start), not before: until then it
// only waits, and a ctx that ends meanwhile sends nothing.
func payLoop(ctx context.Context, s io.Writer, key crypto.PrivKey, l *auction.Lease, leaseCID string, first uint64, stopAfter int, paid func(n uint64, total auction.Credits, raw []byte)) {
	if wait := time.Until(time.Unix(l.Start, 0)); wait > 0 {
		w := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			w.Stop()
			return
		case <-w.C:
		}
	}
	interval := time.Duration(l.BillingSec) * time.Second
	t := time.NewTicker(interval)
	defer t.Stop()
	per := intervalPrice(l)
	for n := first; ; n++ {
		if stopAfter > 0 && n > uint64(stopAfter) {
			return
		}
		if ctx.Err() != nil {
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

// chargeBound is the most a provider may charge for a run of l that ended
// at end by this node's clock: the lease price (auction/provider.Cost) for
// the time from when it could first bill, within authorised (the vouchers
// this node signed). The provider bills from the job's start, which comes
// after this node sent the start request (sent; zero if unknown) and no
// earlier than the lease's window start, less the grace the provider
// gives a late voucher (which also allows for the two clocks disagreeing).
// Pulling the image and a pause count in the bound; the provider bills
// neither, so an honest charge is within it.
func chargeBound(l *auction.Lease, sent, end time.Time, authorised auction.Credits) auction.Credits {
	from := time.Unix(l.Start, 0).Add(-sched.Grace(l))
	if sent.After(from) {
		from = sent
	}
	c, _ := sched.Charge(l, end.Sub(from), authorised)
	return c
}

// recordCharge records in j the provider's charge for its run, ended at
// end by this node's clock. It returns a note when the charge is more
// than this node's own bound, or below zero (no charge can be): the
// figure is kept, shown as disputed.
func recordCharge(j *JobRecord, charged auction.Credits, end time.Time) string {
	l, _, err := auction.DecodeLeaseUnverified(j.Lease) // verified when it was co-signed
	if err != nil {
		return ""
	}
	var sent time.Time
	if j.StartSent != nil {
		sent = *j.StartSent
	}
	j.Charged, j.ChargeBound = &charged, chargeBound(l, sent, end, j.Paid)
	j.ChargeDisputed, j.Refunded = charged < 0 || charged > j.ChargeBound, 0
	if charged < 0 {
		return fmt.Sprintf("the provider says it charged %s credits, a negative charge, which is invalid: disputed",
			auction.FormatCredits(charged))
	}
	if j.ChargeDisputed {
		return fmt.Sprintf("the provider says it charged %s credits, more than the %s this node reckons the run cost: disputed",
			auction.FormatCredits(charged), auction.FormatCredits(j.ChargeBound))
	}
	j.Refunded = j.Paid - charged
	return ""
}
