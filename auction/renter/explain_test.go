package renter

import (
	"encoding/json"
	"testing"
)

// TestExplainJSON: prices are integer Credits under their own keys, so a
// job record node wrote with float64 credits still decodes (its prices
// left out) instead of failing or reading 1.2 credits as 1 millionth.
func TestExplainJSON(t *testing.T) {
	ex := Explain{Quotes: []QuoteOutcome{{Provider: "p", Bid: 1_200_000}}, Winner: "p", ClearingPrice: 1_500_000}
	raw, err := json.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"considered":0,"funnel":null,"quotes":[{"provider":"p","bid_price":1200000}],"winner":"p","clearing":1500000}`
	if string(raw) != want {
		t.Errorf("JSON %s, want %s", raw, want)
	}
	var old Explain
	if err := json.Unmarshal([]byte(`{"considered":3,"quotes":[{"provider":"p","bid":1.2}],"winner":"p","clearing_price":1.2}`), &old); err != nil {
		t.Fatalf("a record with float64 credits no longer decodes: %v", err)
	}
	if old.Considered != 3 || old.ClearingPrice != 0 || old.Quotes[0].Bid != 0 {
		t.Errorf("old record read as %+v", old)
	}
}
