package renter

import (
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/provider"
)

// Vouchers are cumulative, one interval each, the first at the window's
// start and never before it.
func TestPacingPaysAnIntervalAheadFromTheWindowStart(t *testing.T) {
	l := &auction.Lease{Price: 500_000, GPUs: 2, BillingSec: 300, Start: t0.Unix(), End: t0.Add(time.Hour).Unix()}
	p := PacingOf(l)
	if p.Per != provider.IntervalPrice(l) || p.Per != 83_333 || p.Interval != 5*time.Minute {
		t.Fatalf("pacing %+v, want 83,333 per 5 min (0.5 credits per GPU-hour, 2 GPUs)", p)
	}
	for _, c := range []struct {
		now  time.Time
		wait time.Duration
	}{{t0.Add(-90 * time.Second), 90 * time.Second}, {t0, 0}, {t0.Add(time.Minute), 0}} {
		if got := p.FirstWait(c.now); got != c.wait {
			t.Errorf("first wait at %v: %v, want %v", c.now.Sub(t0), got, c.wait)
		}
	}
	for n, want := range map[uint64]auction.Credits{1: 83_333, 2: 166_666, 12: 999_996} {
		if got := p.Total(n); got != want {
			t.Errorf("voucher %d: %d, want %d", n, got, want)
		}
	}
}

// The renter's own bound on a charge: the lease price from when it asked
// for the start (or the window's start less the grace, if later) to the
// exit, to the second, within what it authorised; a charge above it is
// disputed, one within it refunds the rest of the vouchers.
func TestChargeBoundAndDispute(t *testing.T) {
	l := &auction.Lease{Renter: "r", Provider: "p", Price: 500_000, GPUs: 1, BillingSec: 300, Start: t0.Unix(), End: t0.Add(time.Hour).Unix()}
	per := provider.IntervalPrice(l) // 41,666
	if b := ChargeBound(l, t0.Add(10*time.Second), t0.Add(10*time.Second+300*time.Millisecond), per); b != 139 {
		t.Fatalf("bound for 0.3 s from the start request: %d, want 139 (one second at 0.5 credits per GPU-hour)", b)
	}
	if b := ChargeBound(l, time.Time{}, t0.Add(10*time.Second), per); b != provider.Cost(l, 40*time.Second) {
		t.Fatalf("bound without a start request time: %d, want 40 s from the window's start less the 30 s grace", b)
	}
	if b := ChargeBound(l, t0, t0.Add(time.Hour), per); b != per {
		t.Fatalf("bound of a long run: %d, want capped at the vouchers' %d", b, per)
	}
	for _, c := range []struct {
		name                 string
		charged, paid, bound auction.Credits
		disputed             bool
		refunded             auction.Credits
		says                 string
	}{
		{"honest", 139, per, 417, false, per - 139, ""},
		{"at the bound", 417, per, 417, false, per - 417, ""},
		{"nothing", 0, per, 417, false, per, ""},
		{"above the bound", 418, per, 417, true, 0, "more than the 0.000417 this node reckons"},
		{"negative", -1, per, 417, true, 0, "a negative charge"},
	} {
		got := CheckCharge(c.charged, c.paid, c.bound)
		if got.Disputed != c.disputed || got.Refunded != c.refunded || !strings.Contains(got.Why, c.says) || (got.Why == "") == c.disputed {
			t.Errorf("%s: %+v, want disputed %v, refunded %d, saying %q", c.name, got, c.disputed, c.refunded, c.says)
		}
	}
}
