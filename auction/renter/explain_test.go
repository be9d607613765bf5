package renter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
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

// TestExplainRankedInCredits: a ranked bid says why it ranked where it
// did in integer Credits: its quality credit per part and its effective
// price.
func TestExplainRankedInCredits(t *testing.T) {
	r := auction.ScoreBid(auction.Bid{Provider: "p", Price: 1_000_000}, auction.ScoreParts{Reputation: 0.5, Locality: 1}, 2_000_000)
	raw, err := json.Marshal(Explain{Ranked: []auction.Ranked{r}, Rule: RuleSecondPrice})
	if err != nil {
		t.Fatal(err)
	}
	// QualityCap 0.4: reputation 0.5 x 0.2, locality 1 x 0.08.
	for _, want := range []string{`"effective":820000`, `"credit":{"reputation":100000,"rtt":0,"locality":80000}`, `"rule":"second-price"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("JSON %s lacks %s", raw, want)
		}
	}
}
