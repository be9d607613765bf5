package main

import (
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	auctioneer "github.com/gleaner-net/gleaner/auction/renter"
)

// How `job explain` prints the RTT a round used: the value, and whether it
// was measured in the round's quote exchange or came from the peerstore,
// so that a renter can tell a provider that is far from one not measured.

func rttMS(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// rttFrom names an RTT source as the explain prints it.
func rttFrom(source string) string {
	switch source {
	case auctioneer.RTTMeasured:
		return "measured now"
	case auctioneer.RTTPeerstore:
		return "from the peerstore"
	}
	return source
}

// quoteRTT is a quote's RTT line: what the round used for its provider,
// and why the round's own probe failed, if it did.
func quoteRTT(q renter.QuoteOutcome) string {
	s := "unknown"
	if q.RTTSource != "" {
		s = rttMS(q.RTT) + ", " + rttFrom(q.RTTSource)
	}
	if q.RTTError != "" {
		s += " (probe: " + q.RTTError + ")"
	}
	return s
}

// rankedRTT is the RTT a ranked bid was scored by.
func rankedRTT(r auction.Ranked) string {
	if !r.RTTKnown {
		return "unmeasured"
	}
	if r.RTTSource == "" {
		return rttMS(r.RTT)
	}
	return rttMS(r.RTT) + " " + rttFrom(r.RTTSource)
}
