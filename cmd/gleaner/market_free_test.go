package main

import (
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
)

// The offers table shows each offer's next free window: when, how long.
func TestOffersTableShowsNextFree(t *testing.T) {
	res := node.MarketOffersResult{Explain: &auction.Explain{Matched: 3, Considered: 3}, Offers: []node.OfferView{
		{Provider: "free-now", NextFree: &node.FreeWindowView{InS: 0, ForS: 8 * 3600}},
		{Provider: "free-later", NextFree: &node.FreeWindowView{InS: 3 * 3600, ForS: 5*3600 + 1800}},
		{Provider: "sold-out"},
	}}
	var b strings.Builder
	printOffers(&b, res, false, "in effect now")
	out := b.String()
	for _, want := range []string{"NEXT FREE", "now, 8h0m0s", "in 3h0m0s, 5h30m0s", "none"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
