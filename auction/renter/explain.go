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
	// SecondScore is what the second-score rule (with the newcomer rule)
	// would pay the winner: ClearingPrice itself, except under
	// WithPayAsBid, where the gap between the two is what the winner
	// could have asked more and still won. Not on the wire.
	SecondScore auction.Credits `json:"-"`
	// Rule is how Winner was chosen: RuleSecondPrice (the lowest
	// Effective price in Ranked, paid the runner-up's Effective plus its
	// own credit) or RuleNewcomer (the round was open to Newcomers).
	Rule string `json:"rule,omitempty"`
	// Newcomers are the ranked bidders the newcomer rule counted, in a
	// round open to newcomers; empty otherwise.
	Newcomers []string `json:"newcomers,omitempty"`
	// Clearing says what the lease costs and why, beside ClearingPrice;
	// nil when nothing cleared.
	Clearing *Clearing `json:"clearing_why,omitempty"`
	// Feasible is how many of the Considered offers passed every check:
	// Considered = Feasible + the Funnel's removals.
	Feasible int `json:"feasible,omitempty"`
	// Undisturbed is how many of the feasible offers would leave the job
	// undisturbed (auction.Undisturbed); when it is above 0 and below
	// Feasible, only those were asked for quotes.
	Undisturbed int `json:"undisturbed,omitempty"`
	// Relax is the one change to the spec that would admit the most
	// offers that failed a check (auction.Relax), computed when nothing
	// was feasible or the book is small (RelaxBookMax); nil when no
	// single change admits any.
	Relax *auction.Relaxation `json:"relax,omitempty"`
}

// Clearing is the clearing price and the rule that set it, in numbers
// and in words (Why), for `job run` and `job status`.
type Clearing struct {
	Price    auction.Credits `json:"price" doc:"the lease's price, micro-credits per GPU-hour"`
	Rule     string          `json:"rule"` // RuleSecondPrice or RuleNewcomer
	MaxPrice auction.Credits `json:"max_price" doc:"the spec's max_price, micro-credits per GPU-hour"`
	// WinnerBid is what the winner asked, WinnerCredit its quality
	// credit (reputation, RTT, locality).
	WinnerBid    auction.Credits `json:"winner_bid" doc:"micro-credits per GPU-hour"`
	WinnerCredit auction.Credits `json:"winner_credit" doc:"micro-credits per GPU-hour"`
	// RunnerUp is the next best bidder, if any, with its ask and credit.
	RunnerUp       string          `json:"runner_up,omitempty"`
	RunnerUpBid    auction.Credits `json:"runner_up_bid,omitempty" doc:"micro-credits per GPU-hour"`
	RunnerUpCredit auction.Credits `json:"runner_up_credit,omitempty" doc:"micro-credits per GPU-hour"`
	// Bound is what set Price: "runner-up" (the second-score price),
	// "max_price" (it capped that), "own bid" (the winner's ask was
	// higher than that), "only bid" or "newcomer".
	Bound string `json:"bound"`
	Why   string `json:"why"` // "1.5/GPU-h: the runner-up's price, the second-score rule; your max 2; the winner asked 0.6"
}

// Clearing bounds.
const (
	BoundRunnerUp = "runner-up"
	BoundMaxPrice = "max_price"
	BoundOwnBid   = "own bid"
	BoundOnlyBid  = "only bid"
	BoundNewcomer = "newcomer"
)

// clearingOf explains a round's clearing: winner paid price under rule,
// among pool (the bids it cleared against) for a spec of maxPrice.
func clearingOf(pool []auction.Ranked, winner auction.Ranked, price auction.Credits, rule string, maxPrice auction.Credits) *Clearing {
	c := &Clearing{Price: price, Rule: rule, MaxPrice: maxPrice,
		WinnerBid: winner.Bid.Price, WinnerCredit: winner.Credit.Total()}
	var ru *auction.Ranked // the best bid but the winner's, as auction.Clear picks it
	for i := range pool {
		if r := &pool[i]; r.Bid.Provider != winner.Bid.Provider && (ru == nil || auction.Better(r, ru)) {
			ru = r
		}
	}
	if ru != nil {
		c.RunnerUp, c.RunnerUpBid, c.RunnerUpCredit = ru.Bid.Provider, ru.Bid.Price, ru.Credit.Total()
	}
	f := auction.FormatCredits
	var how string
	switch {
	case rule == RulePayAsBid:
		c.Bound, how = BoundOwnBid, "the winner's own ask (pay-as-bid, a simulator study)"
	case rule == RuleNewcomer:
		c.Bound = BoundNewcomer
		how = "a round open to newcomers: the established bidders' second price or the next newcomer's ask, whichever is lower"
	case ru == nil:
		c.Bound, how = BoundOnlyBid, "the only bid, paid as asked"
	case price == maxPrice && price > winner.Bid.Price:
		c.Bound = BoundMaxPrice
		how = fmt.Sprintf("your max_price, which capped the second-score price (the runner-up asked %s%s)", f(ru.Bid.Price), credits(c))
	case price == winner.Bid.Price:
		c.Bound = BoundOwnBid
		how = "the winner's own ask, above the runner-up's quality-adjusted price"
	default:
		c.Bound = BoundRunnerUp
		how = "the runner-up's price, the second-score rule"
		if q := credits(c); q != "" {
			how = fmt.Sprintf("the runner-up's price, the second-score rule: it asked %s%s", f(ru.Bid.Price), q)
		}
	}
	c.Why = fmt.Sprintf("%s/GPU-h: %s; your max %s; the winner asked %s", f(price), how, f(maxPrice), f(winner.Bid.Price))
	return c
}

// credits says how the quality credits moved the runner-up's price, ""
// when they did not.
func credits(c *Clearing) string {
	if c.RunnerUpCredit == 0 && c.WinnerCredit == 0 {
		return ""
	}
	return fmt.Sprintf(", less its quality credit %s, plus the winner's %s",
		auction.FormatCredits(c.RunnerUpCredit), auction.FormatCredits(c.WinnerCredit))
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
	// GPUs the bids named, or quotes were declined because the free GPUs
	// were promised to other live quotes (auction.ReasonHeld), and the
	// awards tried were refused for no other reason. Capacity may well be free, so Place asks for
	// quotes again at once rather than giving up or spending a re-auction.
	ErrRaced = errors.New("lost the race for the GPUs")
)

// NoMatchError says why a round leased nothing.
type NoMatchError struct {
	Considered int  // offers after exclusions
	Excluded   int  // offers left out because the request excludes them (providers this job left)
	Feasible   int  // of those, how many passed every feasibility check
	Raced      bool // awards lost races for GPUs (RefusedRaced), the others went unanswered
	// Held: no award lost a race, but providers declined because their
	// free GPUs were promised to other renters' live quotes
	// (auction.ReasonHeld); Raced is set too, as the renter acts the same.
	Held bool
	// Unanswered: no provider answered the round's quotes in time (slow
	// under a burst; a hold one may have placed was released). Raced is
	// set too: capacity may well be free, and a backoff that spends a
	// re-auction would end a burst's job without a match only because
	// providers were slow (issue 33).
	Unanswered bool
}

func (e *NoMatchError) Error() string {
	switch {
	case e.Raced && e.Unanswered:
		return fmt.Sprintf("%v: %v: no provider answered in time", ErrNoMatch, ErrRaced)
	case e.Raced && e.Held:
		return fmt.Sprintf("%v: %v: the free GPUs were promised to other renters' quotes", ErrNoMatch, ErrRaced)
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

// RelaxBookMax is the largest book a round searches for a relaxation
// when some offer was feasible: the search runs every check on every
// offer (6-9 ms for 5,000 offers, 100-150 ms for
// 100,000), which a round that leased should not pay for a large book.
// A round with nothing feasible always searches: that is when the renter
// needs it.
const RelaxBookMax = 5_000

// diagnose is what `job explain` lists of a round's rejections: the
// first MaxRejected, each with every check its offer fails and the
// numbers (auction.Diagnosed), and the one change to the spec that
// admits the most (auction.Relax).
func diagnose(spec *auction.JobSpec, book []*auction.Offer, rejected []auction.Rejection, feasible int, env auction.Env) ([]auction.Rejection, *auction.Relaxation) {
	if len(rejected) == 0 {
		return nil, nil
	}
	listed := rejected[:min(len(rejected), MaxRejected)]
	out := make([]auction.Rejection, len(listed))
	// Feasible keeps the book's order, so one walk pairs each listed
	// rejection with its offer, and stops at the last of them.
	j := 0
	for i, r := range listed {
		for j < len(book) && (book[j] == nil || book[j].Provider != r.Provider) {
			j++
		}
		if j == len(book) { // not in order after all: leave the rest as they are
			copy(out[i:], listed[i:])
			break
		}
		out[i] = auction.Diagnosed(spec, r, book[j], env)
		j++
	}
	var relax *auction.Relaxation
	if feasible == 0 || len(book) <= RelaxBookMax {
		relax = auction.Relax(spec, book, env)
	}
	return out, relax
}
