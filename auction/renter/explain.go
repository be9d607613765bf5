package renter

import (
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Explain records why a round came out as it did: the funnel of
// feasibility checks, every quote's outcome, why bids were not admitted,
// the ranking (each bid's quality credit and Effective price, in
// Credits), every award tried, and the clearing. Prices are Credits,
// millionths of a credit per GPU-hour, in JSON as integers; their keys
// differ from those node's records used for float64 credits ("bid",
// "clearing_price"), so that an old record never decodes as a price a
// million times too small.
type Explain struct {
	Considered    int                  `json:"considered"` // offers after exclusions, pin and convictions
	Funnel        []auction.FunnelStep `json:"funnel"`
	Rejected      []auction.Rejection  `json:"rejected,omitempty"` // the first MaxRejected
	Quotes        []QuoteOutcome       `json:"quotes"`
	NotAdmitted   []auction.Rejection  `json:"not_admitted,omitempty"` // authentic bids AdmitBids refused
	Ranked        []auction.Ranked     `json:"ranked,omitempty"`
	Awards        []AwardOutcome       `json:"awards,omitempty"` // in the order tried
	Winner        string               `json:"winner,omitempty"`
	ClearingPrice auction.Credits      `json:"clearing,omitempty" doc:"the cleared price the lease pays: micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
	// Rule is how Winner was chosen: RuleSecondPrice (the lowest
	// Effective price in Ranked, paid the runner-up's Effective plus its
	// own credit) or RuleNewcomer (the round was open to Newcomers).
	Rule string `json:"rule,omitempty"`
	// Newcomers are the ranked bidders the newcomer rule counted, in a
	// round open to newcomers; empty otherwise.
	Newcomers []string `json:"newcomers,omitempty"`
}

// MaxRejected bounds Explain.Rejected: a book of 100,000 offers would
// otherwise put 100,000 rejections into every job record.
const MaxRejected = 100

// QuoteOutcome is one candidate's answer to the request for quotes:
// exactly one of Bid, Declined and Error is set.
type QuoteOutcome struct {
	Provider string          `json:"provider"`
	Bid      auction.Credits `json:"bid_price,omitempty" doc:"the signed bid's price: micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
	Declined string          `json:"declined,omitempty"`
	Error    string          `json:"error,omitempty"` // unreachable, too late, or a bad bid ("bad bid: ...")
	// RTT is the round trip this round used for the provider, RTTSource
	// where it came from (RTTMeasured, RTTPeerstore; "" and no RTT when
	// unknown), and RTTError why this round's probe got no answer.
	RTT       time.Duration `json:"rtt,omitempty" doc:"nanoseconds"`
	RTTSource string        `json:"rtt_source,omitempty"`
	RTTError  string        `json:"rtt_error,omitempty"`
}

// AwardOutcome is one award tried: the lease at Price was co-signed, or
// refused by the provider (Refused, Raced when the bid's GPUs were taken
// meanwhile), or failed (Error: unreachable, or a lease other than the one
// proposed came back).
type AwardOutcome struct {
	Provider string          `json:"provider"`
	Price    auction.Credits `json:"price" doc:"the price proposed: micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
	Refused  string          `json:"refused,omitempty"`
	Raced    bool            `json:"raced,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// The outcomes of a round that leased nothing. Every such error from
// Auction or Place is a *NoMatchError and matches ErrNoMatch; one that
// lost only races for GPUs also matches ErrRaced.
var (
	ErrNoMatch = errors.New("no provider matched")
	// ErrRaced: awards were refused because concurrent awards took the
	// GPUs the bids named, and the rest went unanswered (none was refused
	// for another reason). Capacity may well be free, so Place asks for
	// quotes again at once rather than giving up or spending a re-auction.
	ErrRaced = errors.New("lost the race for the GPUs")
)

// NoMatchError says why a round leased nothing.
type NoMatchError struct {
	Considered int  // offers after exclusions
	Excluded   int  // offers left out because the request excludes them (providers this job left)
	Feasible   int  // of those, how many passed every feasibility check
	Raced      bool // awards lost races for GPUs (RefusedRaced), the others went unanswered
}

func (e *NoMatchError) Error() string {
	switch {
	case e.Raced:
		return fmt.Sprintf("%v: %v: other awards took the GPUs our bids named", ErrNoMatch, ErrRaced)
	case e.Feasible == 0 && e.Excluded > 0:
		return fmt.Sprintf("%v: %d offers known besides the %d this job left, none feasible", ErrNoMatch, e.Considered, e.Excluded)
	case e.Feasible == 0:
		return fmt.Sprintf("%v: %d offers known, none feasible", ErrNoMatch, e.Considered)
	}
	return fmt.Sprintf("%v: %d feasible offers, no acceptable bid", ErrNoMatch, e.Feasible)
}

// Is makes errors.Is(err, ErrNoMatch) hold for every NoMatchError, and
// errors.Is(err, ErrRaced) for a raced one.
func (e *NoMatchError) Is(target error) bool {
	return target == ErrNoMatch || target == ErrRaced && e.Raced
}
