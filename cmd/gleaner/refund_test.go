package main

import (
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/renting"
)

// `job status` shows what the vouchers paid, and the provider's charge and
// refund only when the charge is within the renter's own bound.
func TestJobStatusShowsChargeAndRefund(t *testing.T) {
	charged := auction.Credits(625)
	j := renting.JobRecord{ID: "j", State: renting.StateCompleted, Paid: 37_500, Vouchers: 1, Charged: &charged, Refunded: 36_875, ChargeBound: 1_250}
	var b strings.Builder
	printJob(&b, j)
	for _, want := range []string{
		"paid:      0.0375 credits in 1 signed voucher(s)",
		"charged:   0.000625 credits for the time run, to the second",
		"refunded:  0.036875 credits",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	j.ChargeDisputed, j.Refunded = true, 0
	b.Reset()
	printJob(&b, j)
	if out := b.String(); !strings.Contains(out, "charged:   DISPUTED: the provider says 0.000625 credits, more than the 0.00125 credits") || strings.Contains(out, "refunded:") {
		t.Errorf("a disputed charge:\n%s", out)
	}
}

// Each kind of charge gets its own honest line: within the bound, over it
// (more than), and below zero (not "more than": no charge can be).
func TestJobStatusChargeLabels(t *testing.T) {
	for _, c := range []struct {
		name     string
		charged  auction.Credits
		disputed bool
		want     string
		not      string
	}{
		{"within the bound", 625, false, "charged:   0.000625 credits for the time run", "DISPUTED"},
		{"over the bound", 2_000, true, "charged:   DISPUTED: the provider says 0.002 credits, more than the 0.00125 credits", "negative"},
		{"negative", -625, true, "charged:   DISPUTED: the provider says -0.000625 credits, a negative charge, which is invalid", "more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			charged := c.charged
			j := renting.JobRecord{ID: "j", State: renting.StateCompleted, Paid: 37_500, Vouchers: 1, Charged: &charged, ChargeBound: 1_250, ChargeDisputed: c.disputed}
			var b strings.Builder
			printJob(&b, j)
			if out := b.String(); !strings.Contains(out, c.want) || strings.Contains(out, c.not) {
				t.Errorf("want %q and no %q:\n%s", c.want, c.not, out)
			}
		})
	}
}
