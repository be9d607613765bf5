package renter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Re-auction defaults, as node's renter has always used them.
const (
	// DefaultRaceRounds bounds the immediate re-quotes after lost races,
	// per re-auction.
	DefaultRaceRounds = 8
	// DefaultBackoff is the first wait after a round without a match; it
	// doubles with every re-auction spent, up to DefaultMaxBackoff.
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 30 * time.Second
	// DefaultPatience is the Patience node gives a job sent back to
	// auction: a minute of rounds without a match that spend nothing,
	// which covers an offer's republishing (at most every 10 s) and its
	// gossip, and a provider's preemption notice, before the book is
	// taken at its word.
	DefaultPatience = time.Minute
	// DefaultPatienceStep caps the wait between patient rounds.
	DefaultPatienceStep = 10 * time.Second
	// HeldPatience is how long, in all, Place keeps asking again after
	// rounds declined because the free GPUs were promised to other
	// renters' live quotes (auction.ReasonHeld), before such rounds count
	// against RaceRounds: the lifetime of a provider's quote hold
	// (auction/provider.DefaultQuoteHold), by when every hold that
	// declined the first round has been awarded, released or has lapsed.
	// A hold outlives a round whose quote was lost (3 s), so eight quick
	// re-quotes alone would give up on capacity about to free.
	HeldPatience = 10 * time.Second
)

// Policy is when Place auctions again.
type Policy struct {
	// MaxReauctions is the spec's retry.max_reauctions: how many rounds
	// after the first a job may spend, on no match here and, in the
	// caller, on lost or preempted leases.
	MaxReauctions int
	// Attempt is how many of them the job has spent already; it picks the
	// backoff (1 s after the first round, 2 s after the second, ...).
	Attempt int
	// RaceRounds bounds the immediate re-quotes per re-auction after a
	// round in which every award lost a race for GPUs; they spend no
	// re-auction. 0 means DefaultRaceRounds, negative none.
	RaceRounds int
	// Backoff and MaxBackoff shape the wait before a re-auction: Backoff
	// doubled per re-auction spent, capped at MaxBackoff. 0 means the
	// defaults.
	Backoff, MaxBackoff time.Duration
	// Rand draws the jitter before a re-quote: 20 ms plus up to 80 ms per
	// race round so far, so that renters that raced each other do not
	// race again. nil uses the global source; a Rand must not be shared by
	// concurrent calls.
	Rand *rand.Rand
	// Patience is how long, in all, Place waits between rounds without a
	// match before such rounds spend re-auctions. A job sent back to
	// auction (its provider was lost, preempted it or could not start it)
	// meets a book that has not caught up yet: a provider that freed GPUs
	// has not published them, another is still giving a bronze job its
	// notice. Within Patience such a round is retried after Backoff,
	// doubled per patient round and capped at PatienceStep, and spends
	// nothing; once the waits add up to Patience, rounds count as without
	// it. 0: none, as for a new job, whose book is as current as it gets.
	Patience time.Duration
	// PatienceStep caps the wait between patient rounds; 0 means
	// DefaultPatienceStep.
	PatienceStep time.Duration
	// PatienceBackoff is the first patient wait, doubled per patient
	// round up to PatienceStep; 0 means Backoff. The simulator's renters,
	// whose Backoff is its 5-minute retry, look again after 1 s, 2 s, ...
	// as node's renter does.
	PatienceBackoff time.Duration
	// Progress, when set, is told of every re-auction before its wait.
	Progress func(Progress)
}

// Progress is a round without a match that Place will follow with a
// re-auction after Wait.
type Progress struct {
	Err           error // the round's *NoMatchError
	Explain       *Explain
	Wait          time.Duration
	Reauction     int // this re-auction's number, 1-based, counting Policy.Attempt
	MaxReauctions int
	// Patient: the round spends no re-auction (Policy.Patience); Waited
	// is how long the patient waits so far add up to, this one included.
	Patient          bool
	Waited, Patience time.Duration
}

// String is the note a job's record shows, as node has always written it:
// "no provider matched: ...; retrying in 4s (2 of 3)", or for a patient
// round "...; retrying in 4s: offers may not have caught up (7s of 1m0s
// waited, no re-auction spent)".
func (p Progress) String() string {
	if p.Patient {
		return fmt.Sprintf("%v; retrying in %s: offers may not have caught up (%s of %s waited, no re-auction spent)",
			p.Err, p.Wait, p.Waited, p.Patience)
	}
	return fmt.Sprintf("%v; retrying in %s (%d of %d)", p.Err, p.Wait, p.Reauction, p.MaxReauctions)
}

// Place auctions until a lease is made or the policy gives up. After a
// round lost only to races for GPUs it asks again at once, after a short
// jitter, up to RaceRounds times without counting a re-auction (a round
// that no provider answered in time counts as one; after rounds declined
// because the GPUs are promised to other quotes, for HeldPatience first);
// after a
// round without a match it backs off (1 s, 2 s, 4 s, ... at most 30 s by
// default) and auctions again while re-auctions are left, except that
// while the waits add up to less than Patience a round without a match
// spends none (see Policy.Patience). Any other error,
// or ctx ending, returns at once. The last round's Explain is in the
// result either way, and Result.Attempt says how many re-auctions the job
// has now spent.
func (a *Auctioneer) Place(ctx context.Context, req Request, pol Policy) (Result, error) {
	raceRounds := pol.RaceRounds
	if raceRounds == 0 {
		raceRounds = DefaultRaceRounds
	}
	attempt, races, total := pol.Attempt, 0, 0
	held, heldWaited := 0, time.Duration(0) // rounds declined as held, and their waits
	var waited time.Duration                // the patient waits so far
	patient := 0                            // patient rounds so far
	for {
		res, err := a.Auction(ctx, req)
		res.Attempt, res.Races = attempt, total
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		var nm *NoMatchError
		if errors.As(err, &nm) && nm.Held && heldWaited < HeldPatience && raceRounds > 0 {
			held++
			total++
			wait := pol.jitter(min(held, raceRounds))
			heldWaited += wait
			if err := a.clock.Sleep(ctx, wait); err != nil {
				return res, err
			}
			continue
		}
		if errors.Is(err, ErrRaced) && races < raceRounds {
			races++
			total++
			if err := a.clock.Sleep(ctx, pol.jitter(races)); err != nil {
				return res, err
			}
			continue
		}
		races, held, heldWaited = 0, 0, 0
		if !errors.Is(err, ErrNoMatch) {
			return res, err
		}
		if wait := pol.patientWait(patient, waited); wait > 0 {
			patient++
			waited += wait
			if pol.Progress != nil {
				pol.Progress(Progress{Err: err, Explain: res.Explain, Wait: wait, Reauction: attempt + 1, MaxReauctions: pol.MaxReauctions,
					Patient: true, Waited: waited, Patience: pol.Patience})
			}
			if err := a.clock.Sleep(ctx, wait); err != nil {
				return res, err
			}
			continue
		}
		if attempt >= pol.MaxReauctions {
			return res, err
		}
		wait := pol.backoff(attempt)
		if pol.Progress != nil {
			pol.Progress(Progress{Err: err, Explain: res.Explain, Wait: wait, Reauction: attempt + 1, MaxReauctions: pol.MaxReauctions})
		}
		if err := a.clock.Sleep(ctx, wait); err != nil {
			return res, err
		}
		attempt++
	}
}

// backoff is the wait before the re-auction that follows attempt rounds.
func (p Policy) backoff(attempt int) time.Duration {
	base, limit := p.Backoff, p.MaxBackoff
	if base <= 0 {
		base = DefaultBackoff
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	wait := base
	for range attempt {
		if wait >= limit {
			break
		}
		wait *= 2
	}
	return min(wait, limit)
}

// patientWait is the wait before the patient round that follows patient
// of them, whose waits add up to waited: Backoff doubled per round, capped
// at PatienceStep and at what is left of Patience; 0 once it is spent.
func (p Policy) patientWait(patient int, waited time.Duration) time.Duration {
	left := p.Patience - waited
	if left <= 0 {
		return 0
	}
	step := p.PatienceStep
	if step <= 0 {
		step = DefaultPatienceStep
	}
	first := p.PatienceBackoff
	if first <= 0 {
		first = p.Backoff
	}
	return min(Policy{Backoff: first, MaxBackoff: step}.backoff(patient), left)
}

// jitter is the wait before the race'th immediate re-quote.
func (p Policy) jitter(race int) time.Duration {
	n := int64(80 * race)
	var r int64
	if p.Rand != nil {
		r = p.Rand.Int64N(n)
	} else {
		r = rand.Int64N(n)
	}
	return time.Duration(20+r) * time.Millisecond
}
