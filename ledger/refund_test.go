package ledger

import (
	"encoding/json"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func credits(c auction.Credits) *auction.Credits { return &c }

// A settlement's charge and refund split its voucher total exactly.
func TestSettlementChargeAndRefundCheck(t *testing.T) {
	f := newVoucherFixture(t)
	good := f.wire(t, 1_500_000)
	base := func(charged *auction.Credits, refund auction.Credits) Settlement {
		return Settlement{Lease: f.lease, Renter: f.renterID, Total: 1_500_000, Voucher: good, Charged: charged, Refund: refund}
	}
	for _, c := range []struct {
		name string
		s    Settlement
		ok   bool
	}{
		{"charged part, refunded the rest", base(credits(625), 1_499_375), true},
		{"charged all", base(credits(1_500_000), 0), true},
		{"charged nothing, refunded all", base(credits(0), 1_500_000), true},
		{"an old entry: no charge, no refund", base(nil, 0), true},
		{"never ran, no voucher", Settlement{Lease: f.lease, Renter: f.renterID, Charged: credits(0)}, true},
		{"charged more than the voucher", base(credits(1_500_001), -1), false},
		{"a negative charge", base(credits(-1), 1_500_001), false},
		{"a refund one micro-credit short", base(credits(625), 1_499_374), false},
		{"a refund one micro-credit over", base(credits(625), 1_499_376), false},
		{"a refund without a charge", base(nil, 1), false},
		{"a charge without a voucher", Settlement{Lease: f.lease, Renter: f.renterID, Charged: credits(1), Refund: -1}, false},
	} {
		if err := c.s.Check(f.provID); (err == nil) != c.ok {
			t.Errorf("%s: Check = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// Paid is the charge, or for an entry written before refunds, the whole
// total; such an entry still decodes and checks.
func TestSettlementPaid(t *testing.T) {
	f := newVoucherFixture(t)
	v := f.wire(t, 37_500)
	old, _ := json.Marshal(map[string]any{"lease": f.lease, "renter": f.renterID, "total": 37_500, "voucher": v})
	s, err := DecodePayload[Settlement](old)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(f.provID); err != nil || s.Charged != nil || s.Paid() != 37_500 {
		t.Fatalf("an old settlement: check %v, charged %v, paid %d", err, s.Charged, s.Paid())
	}
	now, _ := json.Marshal(Settlement{Lease: f.lease, Renter: f.renterID, Total: 37_500, Voucher: v, Charged: credits(625), Refund: 36_875})
	if s, err = DecodePayload[Settlement](now); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(f.provID); err != nil || s.Paid() != 625 || s.Refund != 36_875 {
		t.Fatalf("a refunding settlement %s: check %v, paid %d", now, err, s.Paid())
	}
	// A charge of zero is written, not omitted: it is not an old entry.
	zero, _ := json.Marshal(Settlement{Lease: f.lease, Renter: f.renterID, Total: 37_500, Voucher: v, Charged: credits(0), Refund: 37_500})
	if s, err = DecodePayload[Settlement](zero); err != nil || s.Paid() != 0 {
		t.Fatalf("a zero charge %s read as paid %d (%v)", zero, s.Paid(), err)
	}
}
