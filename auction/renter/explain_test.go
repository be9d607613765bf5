package renter

import (
	"encoding/json"
	"os"
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

// TestClearingSaysWhy: the lease's price comes with the rule that set it
// and the numbers, for job run and job status: the runner-up's price, or
// max_price where it capped that, or the only bid.
func TestClearingSaysWhy(t *testing.T) {
	bid := func(p string, price auction.Credits, maxPrice auction.Credits) auction.Ranked {
		return auction.ScoreBid(auction.Bid{Provider: p, Price: price}, auction.ScoreParts{}, maxPrice)
	}
	for _, c := range []struct {
		name      string
		maxPrice  auction.Credits
		bids      []auction.Credits
		price     auction.Credits
		bound     string
		why       string
		runnerBid auction.Credits
	}{
		{"second score", 2_000_000, []auction.Credits{600_000, 1_500_000}, 1_500_000, BoundRunnerUp,
			"1.5/GPU-h: the runner-up's price, the second-score rule; your max 2; the winner asked 0.6", 1_500_000},
		{"capped by max_price", 1_200_000, []auction.Credits{600_000, 1_200_000}, 1_200_000, BoundMaxPrice, "", 1_200_000},
		{"only bid", 2_000_000, []auction.Credits{600_000}, 600_000, BoundOnlyBid,
			"0.6/GPU-h: the only bid, paid as asked; your max 2; the winner asked 0.6", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ranked []auction.Ranked
			for i, b := range c.bids {
				ranked = append(ranked, bid(string(rune('a'+i)), b, c.maxPrice))
			}
			w, price, ok := auction.Clear(ranked, c.maxPrice)
			if !ok || price != c.price {
				t.Fatalf("cleared %v at %d, want %d", ok, price, c.price)
			}
			got := clearingOf(ranked, w, price, RuleSecondPrice, c.maxPrice)
			if got.Price != c.price || got.Bound != c.bound || got.WinnerBid != 600_000 || got.RunnerUpBid != c.runnerBid || got.MaxPrice != c.maxPrice {
				t.Errorf("%+v", got)
			}
			if c.why != "" && got.Why != c.why {
				t.Errorf("why %q, want %q", got.Why, c.why)
			}
			if !strings.HasPrefix(got.Why, auction.FormatCredits(c.price)+"/GPU-h: ") {
				t.Errorf("why %q does not start with the price", got.Why)
			}
		})
	}
}

// TestMarketDocWorkedExample keeps docs/MARKET.md's worked example of the
// second-score rule and the code in step: A asks 1.2 with credit
// 0.199979, B 1.5 with credit 0.199824, max_price 2; A is paid 1.500155.
func TestMarketDocWorkedExample(t *testing.T) {
	rank := func(p string, bid, credit auction.Credits) auction.Ranked {
		return auction.Ranked{Bid: auction.Bid{Provider: p, Price: bid}, Effective: bid - credit,
			Credit: auction.QualityCredit{Reputation: credit}}
	}
	ranked := []auction.Ranked{rank("A", 1_200_000, 199_979), rank("B", 1_500_000, 199_824)}
	w, price, ok := auction.Clear(ranked, 2_000_000)
	if !ok || w.Bid.Provider != "A" || price != 1_500_155 {
		t.Fatalf("cleared %v: %s at %d, want A at 1500155", ok, w.Bid.Provider, price)
	}
	c := clearingOf(ranked, w, price, RuleSecondPrice, 2_000_000)
	doc, err := os.ReadFile("../../docs/MARKET.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"why:       " + c.Why, "**1.500155**", "A 1.2 - 0.199979 = 1.000021", "0.199824 = 1.300176"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/MARKET.md's worked example lacks %q", want)
		}
	}
}
