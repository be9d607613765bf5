package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
)

// The API's amounts are micro-credits; every text output prints them as
// exact decimal credits with the unit.
func TestAmountsPrintAsCredits(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Minute)
	var b strings.Builder
	printJob(&b, renting.JobRecord{ID: "j", State: renting.StateCompleted, Provider: "p", Price: 450_000, GPUs: 2,
		StartedAt: &start, EndedAt: &end, Paid: 1_000, Vouchers: 2})
	printExplain(&b, renter.Explain{Quotes: []renter.QuoteOutcome{{Provider: "p", Bid: 400_001}}, Winner: "p", ClearingPrice: 450_000})
	printEvidence(&b, trust.Evidence{Peer: "p", Outcomes: map[ledger.OutcomeResult]int{}, PaidTotal: 1_350_000})
	printOfferShow(&b, node.OfferShowResult{Offered: true, Offer: &node.OfferView{Prices: map[string]auction.Credits{"silver": 600_000, "bronze": 450_000}}})
	out := b.String()
	for _, want := range []string{
		"price:     0.45 credits per GPU-hour x 2 GPU(s)",
		"(1.35 credits at the lease price)", // 0.45 x 2 GPUs x 1.5 h, exactly
		"paid:      0.001 credits in 2 signed voucher(s)",
		"bid 0.400001 credits per GPU-hour",
		"paid 0.45 credits per GPU-hour (second-price clearing)",
		"paid 1.35 credits",
		"prices:      silver 0.6, bronze 0.45 credits per GPU-hour",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestCostAtIsExactAndNeverOverflows(t *testing.T) {
	if c := costAt(1, 1, time.Hour-time.Nanosecond); c != 0 {
		t.Errorf("under an hour at 1 micro-credit: %d, want 0 (rounded down)", c)
	}
	if c := costAt(3_600_000, 3, time.Second); c != 3_000 {
		t.Errorf("3 GPUs for 1 s at 3.6 credits per GPU-hour: %d, want 3000", c)
	}
	if c := costAt(math.MaxInt64, 8, 1000*time.Hour); c != math.MaxInt64 {
		t.Errorf("an overflowing cost: %d, want the largest amount", c)
	}
}
