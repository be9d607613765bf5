package renter

import (
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/provider"
)

// Payment is the renter's half of billing, decided here and done by the
// caller: node signs the vouchers and sends them up the job stream, and
// records the provider's charge. The provider's half (its meter, pause and
// settlement) is auction/provider's; the renter reckons with the same
// rules (provider.IntervalPrice, provider.Charge), so an honest charge is
// never disputed. Amounts are auction.Credits, integers, never floats.

// Pacing is when and how much a renter pays for one lease: a cumulative
// voucher per billing interval, the first at the lease's window start
// (never at the award: a gold reservation pays nothing while it waits),
// each paying one interval ahead, so that neither side risks more than an
// interval plus the provider's grace.
type Pacing struct {
	Start    time.Time       // the lease's window start: the first voucher is due then
	Interval time.Duration   // the lease's billing interval
	Per      auction.Credits // what one interval costs (provider.IntervalPrice)
}

// PacingOf is the pacing of lease l.
func PacingOf(l *auction.Lease) Pacing {
	return Pacing{Start: time.Unix(l.Start, 0), Interval: time.Duration(l.BillingSec) * time.Second, Per: provider.IntervalPrice(l)}
}

// FirstWait is how long a renter that begins paying at now waits before
// its first voucher: until the window start, and not at all after it.
func (p Pacing) FirstWait(now time.Time) time.Duration { return max(p.Start.Sub(now), 0) }

// Total is voucher n's cumulative amount (n counts from 1): n intervals.
func (p Pacing) Total(n uint64) auction.Credits { return p.Per * auction.Credits(n) }

// ChargeBound is the most a provider may charge for a run of l that ended
// at end by the renter's clock: the lease price (provider.Cost) for the
// time from when it could first bill, within authorised (the vouchers the
// renter signed). The provider bills from the job's start, which comes
// after the renter sent the start request (sent; zero if unknown) and no
// earlier than the lease's window start, less the grace the provider
// gives a late voucher (which also allows for the two clocks disagreeing).
// Pulling the image and a pause count in the bound; the provider bills
// neither, so an honest charge is within it.
func ChargeBound(l *auction.Lease, sent, end time.Time, authorised auction.Credits) auction.Credits {
	from := time.Unix(l.Start, 0).Add(-provider.Grace(l))
	if sent.After(from) {
		from = sent
	}
	c, _ := provider.Charge(l, end.Sub(from), authorised)
	return c
}

// ChargeCheck is the renter's verdict on a provider's charge.
type ChargeCheck struct {
	// Disputed: the charge is negative or above the bound; the figure is
	// kept, shown as disputed, and nothing is reckoned refunded.
	Disputed bool
	// Refunded is what of paid comes back: paid - charged, when the
	// charge is undisputed.
	Refunded auction.Credits
	// Why says why a disputed charge is; "" otherwise.
	Why string
}

// CheckCharge judges charged, the provider's settlement for a run the
// renter paid paid for, against bound (ChargeBound).
func CheckCharge(charged, paid, bound auction.Credits) ChargeCheck {
	switch {
	case charged < 0:
		return ChargeCheck{Disputed: true, Why: fmt.Sprintf("the provider says it charged %s credits, a negative charge, which is invalid: disputed",
			auction.FormatCredits(charged))}
	case charged > bound:
		return ChargeCheck{Disputed: true, Why: fmt.Sprintf("the provider says it charged %s credits, more than the %s this node reckons the run cost: disputed",
			auction.FormatCredits(charged), auction.FormatCredits(bound))}
	}
	return ChargeCheck{Refunded: paid - charged}
}
