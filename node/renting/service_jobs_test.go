package renting

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestJobSpentPrefersTheChargeWithinBound(t *testing.T) {
	for _, c := range []struct {
		name string
		j    JobRecord
		want auction.Credits
	}{
		{"vouchers only", JobRecord{LeaseCID: "L1", Paid: 3_000_000}, 3_000_000},
		{"charged", JobRecord{LeaseCID: "L1", BilledLease: "L1", Paid: 3_000_000, Charged: costCredits(1_250_000)}, 1_250_000},
		{"charge disputed: what was signed", JobRecord{LeaseCID: "L1", BilledLease: "L1", Paid: 3_000_000, Charged: costCredits(9_000_000), ChargeDisputed: true}, 3_000_000},
		{"charge of an earlier lease", JobRecord{LeaseCID: "L2", BilledLease: "L1", Paid: 500_000, Charged: costCredits(1_250_000)}, 500_000},
		{"nothing yet", JobRecord{}, 0},
	} {
		if got := jobSpent(&c.j); got != c.want {
			t.Errorf("%s: spent %d, want %d", c.name, got, c.want)
		}
	}
}

func TestAddCreditsSaturates(t *testing.T) {
	top := auction.Credits(1<<63 - 1)
	if got := addCredits(top-1, 5); got != top {
		t.Errorf("saturating sum %d, want %d", got, top)
	}
	if got := addCredits(7, -3); got != 7 {
		t.Errorf("negative amount counted: %d", got)
	}
}

func costCredits(v auction.Credits) *auction.Credits { return &v }
