package renter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// quotedSpec is the spec as the providers read it (the bytes sent, parsed
// as they parse them) and its SpecHash.
type quotedSpec struct {
	spec *auction.JobSpec
	hash []byte
}

func (a *Auctioneer) sentSpec(specYAML []byte) (quotedSpec, error) {
	spec, err := a.parse(specYAML)
	if err != nil {
		return quotedSpec{}, fmt.Errorf("renter: the spec sent to providers: %w", err)
	}
	hash, err := a.hash(spec)
	return quotedSpec{spec, hash}, err
}

// check refuses a bid for another spec, or whose window would not run the
// job as asked: shorter than duration.max, or a reservation at another
// time. The provider would refuse a lease that changed any of these, so
// such a bid can only waste the award.
func (q quotedSpec) check(b *auction.Bid) error {
	switch {
	case !bytes.Equal(b.SpecHash, q.hash):
		return errors.New("the bid names another job spec than the one we sent")
	case b.DurationSec < int64(q.spec.Duration.Max/time.Second):
		return fmt.Errorf("the bid's window of %d s is shorter than duration.max", b.DurationSec)
	case q.spec.Tier == auction.Gold && b.Start != q.spec.Start.Unix():
		return errors.New("the bid reserves another start than the spec's")
	}
	return nil
}

// badBid begins the outcome of a quote answered with a bid that failed
// its checks: an answer, unlike a timeout.
const badBid = "bad bid: "

type signedBid struct {
	bid auction.Bid
	raw []byte
}

// errQuoteDeadline is the cause of a quote cut off by the deadline.
var errQuoteDeadline = errors.New("no answer before the quote deadline")

// errQuoteStraggled is the cause of a quote cut off because the round had
// closed: a quorum had answered, and this provider was much slower.
var errQuoteStraggled = errors.New("no answer before the round closed (a quorum had answered)")

// A round stops waiting for slow providers once QuoteQuorum candidates
// have answered, at least one of them with a bid, and the stragglers
// have had as long again as those answers took, and at least
// StragglerGrace: a provider that a burst has made slow (or that is far
// away) answers within that, or loses this round, instead of holding
// every renter's round up to the quote deadline while the GPUs the
// faster quotes hold sit idle (issue 33: rounds of 3 s made the burst's
// tail). Declines count as answers: in a burst most quotes are declined
// as held, and the round's one bid then waited for the slowest provider.
// A round without a bid waits for the deadline as before, so that a cut
// never turns a round that would have leased into one without a match.
const (
	QuoteQuorum    = 2
	StragglerGrace = 250 * time.Millisecond
)

// requestQuotes asks every candidate at once and waits at most the quote
// deadline, and once a quorum has answered, at most the straggler wait
// (see QuoteQuorum); silence is recorded as an error, never waited out.
// With a Prober, each candidate's RTT is measured alongside its quote,
// within rttWait, and probes[i] is cands[i]'s; nil without one. Outcomes
// and bids are in the order of cands, so that a round is reproducible.
func (a *Auctioneer) requestQuotes(ctx context.Context, jobID string, nonce, specYAML []byte, sent quotedSpec, cands []*auction.Offer, rttWait time.Duration) ([]signedBid, []QuoteOutcome, []probe) {
	ctx, cancel := withTimeout(a.clock, ctx, a.quoteWait, errQuoteDeadline)
	defer cancel()
	qctx, closeRound := context.WithCancelCause(ctx) // the quotes' own: cut at the straggler wait
	defer closeRound(context.Canceled)
	start := a.clock.Now()
	// Each goroutine writes only its own index of these, then sends it
	// on answered.
	got := make([]*signedBid, len(cands))
	outcomes := make([]QuoteOutcome, len(cands))
	answered := make(chan int, len(cands))
	var probes []probe
	if a.prober != nil {
		probes = make([]probe, len(cands))
	}
	var wg sync.WaitGroup
	for i, o := range cands {
		if probes != nil {
			// Its own exchange, not the quote's reply, so that the time
			// the provider takes to price the job does not count.
			wg.Go(func() { probes[i] = a.measure(ctx, o.Provider, rttWait) })
		}
		wg.Go(func() {
			defer func() { answered <- i }()
			out := &outcomes[i]
			out.Provider = o.Provider
			raw, decline, err := a.transport.Quote(qctx, o.Provider, jobID, nonce, specYAML)
			if cause := context.Cause(qctx); err != nil && cause != nil {
				err = cause // the deadline, the round's close, or the caller's reason says more than the stream's error
			}
			switch {
			case err != nil:
				out.Error = err.Error()
			case decline != "":
				out.Declined = decline
			default:
				b, err := a.checkBid(raw, o.Provider, jobID, nonce, sent)
				if err != nil {
					out.Error = badBid + err.Error()
					return
				}
				out.Bid = b.Price
				got[i] = &signedBid{*b, raw}
			}
		})
	}
	a.awaitQuorum(ctx, answered, got, start, closeRound)
	wg.Wait()
	bids := make([]signedBid, 0, len(got))
	for _, b := range got {
		if b != nil {
			bids = append(bids, *b)
		}
	}
	return bids, outcomes, probes
}

// awaitQuorum returns once every quote has answered (an index on
// answered each; got[i] is set for a bid), or ctx ends, or a quorum has
// answered (see QuoteQuorum) and the straggler wait has passed since:
// then it closes the round (closeRound), which cuts the quotes still out.
func (a *Auctioneer) awaitQuorum(ctx context.Context, answered <-chan int, got []*signedBid, start time.Time, closeRound context.CancelCauseFunc) {
	var straggle <-chan struct{}
	armed := false // the straggler wait is set once a round
	for left, answers, bids := len(got), 0, 0; left > 0; {
		select {
		case i := <-answered:
			left--
			answers++
			if got[i] != nil {
				bids++
			}
			if answers >= QuoteQuorum && bids > 0 && left > 0 && !armed {
				armed = true
				wait := max(a.clock.Now().Sub(start), StragglerGrace)
				sctx, stop := withTimeout(a.clock, ctx, wait, errQuoteStraggled)
				defer stop()
				straggle = sctx.Done()
			}
		case <-straggle:
			if ctx.Err() == nil {
				closeRound(errQuoteStraggled)
			}
			straggle = nil // the quotes cut now answer at once
		case <-ctx.Done():
			return
		}
	}
}

// checkBid admits a quote's bytes as a bid of this round: it decodes and
// verifies (signature by the provider's key, still valid), is the asked
// provider's, for this job and this round's nonce, and passes check.
func (a *Auctioneer) checkBid(raw []byte, provider, jobID string, nonce []byte, sent quotedSpec) (*auction.Bid, error) {
	b, _, err := auction.DecodeSignedBid(raw, a.clock.Now())
	if err != nil {
		return nil, err
	}
	if b.Provider != provider || b.JobID != jobID || !bytes.Equal(b.Nonce, nonce) {
		return nil, errors.New("the bid is not for this job, round or provider")
	}
	if err := sent.check(b); err != nil {
		return nil, err
	}
	return b, nil
}
