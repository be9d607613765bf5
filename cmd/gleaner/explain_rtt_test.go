package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// `job explain` shows, per candidate, the RTT the ranking used and where
// it came from, and why a probe failed.
func TestExplainShowsTheRTTEachRankingUsed(t *testing.T) {
	var b strings.Builder
	printExplain(&b, renter.Explain{
		Quotes: []renter.QuoteOutcome{
			{Provider: "near", Bid: 400_000, RTT: 3200 * time.Microsecond, RTTSource: "measured"},
			{Provider: "old", Bid: 450_000, RTT: 30 * time.Millisecond, RTTSource: "peerstore", RTTError: "no answer in 500ms"},
			{Provider: "silent", Bid: 420_000, RTTError: "no answer in 500ms"},
		},
		Ranked: []auction.Ranked{
			{Bid: auction.Bid{Provider: "near", Price: 400_000}, RTT: 3200 * time.Microsecond, RTTKnown: true, RTTSource: "measured"},
			{Bid: auction.Bid{Provider: "silent", Price: 420_000}},
		},
	})
	out := b.String()
	for _, want := range []string{
		"rtt 3.2 ms, measured now\n",
		"rtt 30.0 ms, from the peerstore (probe: no answer in 500ms)\n",
		"rtt unknown (probe: no answer in 500ms)\n",
		"rtt 0.00: 0 [3.2 ms measured now]",
		"rtt 0.00: 0 [unmeasured]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}
