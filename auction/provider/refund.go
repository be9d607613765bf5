package provider

import (
	"math/big"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Charging to the second. Vouchers pay a whole interval ahead, so a job
// that ends early has prepaid for time it never used; its settlement
// charges what ran and refunds the rest. A voucher stays what it is, the
// cap its renter authorised; the charge is what the provider takes of it.

// BilledSeconds is the running time a charge is for: ran rounded up to a
// whole second (a job that never ran is billed 0 s).
func BilledSeconds(ran time.Duration) int64 {
	if ran <= 0 {
		return 0
	}
	secs := int64(ran / time.Second)
	if ran%time.Second != 0 {
		secs++
	}
	return secs
}

// Cost is what ran costs on l, uncapped: price × GPUs × BilledSeconds(ran)
// / 3600, rounded up to a whole micro-credit. Both roundings favour the
// provider: the time by less than a second, the amount by less than one
// micro-credit. It saturates at the largest Credits instead of
// overflowing.
func Cost(l *auction.Lease, ran time.Duration) auction.Credits {
	secs := BilledSeconds(ran)
	if l.Price <= 0 || l.GPUs <= 0 || secs == 0 {
		return 0
	}
	c := new(big.Int).Mul(big.NewInt(int64(l.Price)), big.NewInt(int64(l.GPUs)))
	c.Mul(c, big.NewInt(secs))
	c.Add(c, big.NewInt(3600-1)) // round the quotient up
	c.Quo(c, big.NewInt(3600))
	if !c.IsInt64() {
		return auction.Credits(1<<63 - 1)
	}
	return auction.Credits(c.Int64())
}

// Charge splits a lease's best voucher total at its end: charged is the
// cost of the billed running time ran (Cost), capped by what the voucher
// covers; refund is the rest of the voucher, which the renter prepaid and
// keeps. A job that never ran is charged 0 and refunded all. A negative
// total (no voucher worth the name) charges and refunds nothing.
func Charge(l *auction.Lease, ran time.Duration, voucherTotal auction.Credits) (charged, refund auction.Credits) {
	if voucherTotal <= 0 {
		return 0, 0
	}
	charged = min(Cost(l, ran), voucherTotal)
	return charged, voucherTotal - charged
}
