package provider

import (
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Span is the half-open interval [Start, End).
type Span struct{ Start, End time.Time }

func (a Span) overlaps(b Span) bool      { return a.Start.Before(b.End) && b.Start.Before(a.End) }
func (a Span) contains(t time.Time) bool { return !t.Before(a.Start) && t.Before(a.End) }

// Commitment is one GPU promised to one lease for Span.
type Commitment struct {
	GPU   int
	JobID string
	Tier  auction.Tier
	Span  Span
}

type commit struct {
	l          *lease
	start, end time.Time
}

// at is the interval c blocks as seen at now: a lease past its end holds
// its GPUs until it is released, so its commitment reaches past now.
func (c commit) at(now time.Time) Span {
	return Span{c.start, later(c.end, now.Add(time.Nanosecond))}
}

// blocks is c.at(now).overlaps(span), without building the span: the
// hot path of every plan and claim.
func (c commit) blocks(span Span, now time.Time) bool {
	return c.start.Before(span.End) && (span.Start.Before(c.end) || !span.Start.After(now))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// preemptible: a commitment of tier held may yield to a lease of tier want.
func preemptible(held, want auction.Tier) bool {
	return held == auction.Bronze && want != auction.Bronze
}

// check reports whether gpus can be committed for span at tier, and the
// bronze leases that would yield; notice is what a bronze lease of this
// claim would get before a reservation later in span. Called with s.mu held.
func (s *Scheduler) check(gpus []int, tier auction.Tier, span Span, now time.Time, notice time.Duration) ([]*lease, error) {
	var victims []*lease
	for _, i := range gpus {
		if !s.knows(i) {
			return nil, fmt.Errorf("%w: GPU %d", ErrUnknownGPU, i)
		}
		g := &s.gpus[i]
		if g.out != "" {
			return nil, fmt.Errorf("%w: GPU %d: %s", ErrWithdrawn, i, g.out)
		}
		if s.standing(g, tier, span, now, notice) > yielding {
			// Held, or by a newcomer's award that only Displace ends.
			return nil, ErrRaced
		}
		for _, c := range g.commits {
			if c.blocks(span, now) && preemptible(c.l.l.Tier, tier) && !slices.Contains(victims, c.l) {
				victims = append(victims, c.l)
			}
		}
	}
	return victims, nil
}

// standing is whether a GPU can be committed for span at tier; a GPU
// stands as its worst commitment does.
type standing uint8

const (
	free     standing = iota // no commitment overlaps span
	yielding                 // only commitments that yield to tier do
	open                     // and newcomers' awards past their grace (soft)
	guarded                  // and newcomers' awards in their grace
	held                     // a commitment that does not yield does
)

// standing is g's standing for a claim of tier for span at now. Called
// with s.mu held.
func (s *Scheduler) standing(g *gpu, tier auction.Tier, span Span, now time.Time, notice time.Duration) standing {
	st := free
	for _, c := range g.commits {
		switch {
		case !c.blocks(span, now):
		case preemptible(c.l.l.Tier, tier):
			st = max(st, yielding)
		case tier == auction.Bronze && c.start.After(now) && backfills(c.start, now, notice):
			// A reservation later in span: the bronze lease is sold the
			// gap and preempted with its notice before the reservation.
		case s.displaceable(c.l, false, now):
			st = max(st, open)
		case s.soft(c.l):
			st = max(st, guarded)
		default:
			return held
		}
	}
	return st
}

// CanPromise answers "can these GPUs be promised for span at tier": nil
// if a Claim of them for that span would succeed now (over bronze leases
// if tier is above bronze), else the error the Claim would return. A gold
// span that starts later is promised for itself alone; any other from now
// (see holdSpan).
func (s *Scheduler) CanPromise(gpus []int, tier auction.Tier, span Span, now time.Time) error {
	if !span.End.After(span.Start) || !span.End.After(now) {
		return fmt.Errorf("%w: span %v..%v", ErrInvalid, span.Start, span.End)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.check(gpus, tier, holdSpan(tier, span, now), now, s.notice)
	return err
}

// Plan picks the n GPUs a bid of tier for span will name, ascending, or
// ErrBusy (or ErrHeld), placing no hold: PlanHeld for a quote's. Free GPUs
// come first, the least recently quoted first, so that quotes beyond the
// hold caps still name different GPUs where they can. Then GPUs held only
// by newcomers' unstarted awards past their grace (which the award will
// displace); for silver and gold, then GPUs held by bronze leases; last,
// GPUs held by newcomers' awards still in their grace, which will be
// displaceable within it or started (the award is then refused as raced,
// and its renter asks again at once). GPUs promised to live quote holds
// are never named, whatever the tier: that promise is what lets their
// awards through.
func (s *Scheduler) Plan(n int, tier auction.Tier, span Span, now time.Time) ([]int, error) {
	plan, _, err := s.PlanHeld(Holder{}, n, tier, span, now)
	return plan, err
}

// PlanHeld is Plan for the quote h answers, which then holds the GPUs it
// names (see hold.go) for the hold's lifetime, unless a cap is reached
// (holding is false: the quote is answered without one). h's earlier hold,
// from an earlier round of its job, is replaced. When the GPUs the plan
// needs are free but promised to other jobs' live quotes, it returns
// ErrHeld: the renter asks again shortly. A zero Holder plans without a
// hold.
func (s *Scheduler) PlanHeld(h Holder, n int, tier auction.Tier, span Span, now time.Time) (plan []int, holding bool, err error) {
	if n < 1 || !span.End.After(span.Start) || !span.End.After(now) {
		return nil, false, fmt.Errorf("%w: %d GPUs for %v..%v", ErrInvalid, n, span.Start, span.End)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	self := h.key()
	s.pruneHolds(now)
	if h.Renter != "" {
		s.dropHold(self) // a new round of the job: its old bid is void to it
	}
	hold := holdSpan(tier, span, now)
	_, est := s.est[h.Renter] // a renter that pays here displaces newcomers at once: no start window for it
	var promised [maxIndex + 1]bool
	anyPromised := len(s.holds) > 0 && s.promisedTo(self, hold, &promised)
	// The GPUs by standing live in one scratch array, reused by every plan.
	g := len(s.gpus)
	if cap(s.scratch) < 4*g {
		s.scratch = make([]int, 4*g)
	}
	var by [4][]int // free, yielding, open, guarded
	for k := range by {
		by[k] = s.scratch[k*g : k*g : (k+1)*g]
	}
	total, kept := 0, 0
	for i := range s.gpus {
		gp := &s.gpus[i]
		if !gp.known || gp.out != "" {
			continue
		}
		if st := s.standing(gp, tier, hold, now, s.notice); st < held {
			if anyPromised && promised[i] || !est && st >= open && s.starting(gp, hold, now) {
				// Could be sold, but a live quote was promised it, or a
				// newcomer's award of moments ago is most likely being
				// started on it: asked again shortly, the quote finds a
				// free GPU or this one past the start window.
				kept++
				continue
			}
			by[st] = append(by[st], i)
			total++
		}
	}
	if total < n {
		if total+kept >= n {
			return nil, false, ErrHeld
		}
		return nil, false, ErrBusy // nothing yields to bronze
	}
	plan = make([]int, 0, n)
	for _, st := range [...]standing{free, open, yielding, guarded} {
		if len(plan) < n {
			plan = append(plan, s.leastQuoted(by[st], n-len(plan))...)
		}
	}
	for _, i := range plan {
		s.seq++
		s.gpus[i].quoted = s.seq
	}
	slices.Sort(plan)
	if h.Renter != "" {
		holding = s.place(h, plan, hold, now)
	}
	return plan, holding, nil
}

// leastQuoted moves the n GPUs of idx that a plan named least recently
// (then the lowest indexes) to its front and returns them. A selection,
// not a sort: n is a few GPUs, idx a machine's.
func (s *Scheduler) leastQuoted(idx []int, n int) []int {
	n = min(n, len(idx))
	for k := range n {
		best := k
		for i := k + 1; i < len(idx); i++ {
			a, b := &s.gpus[idx[i]], &s.gpus[idx[best]]
			if a.quoted < b.quoted || (a.quoted == b.quoted && idx[i] < idx[best]) {
				best = i
			}
		}
		idx[k], idx[best] = idx[best], idx[k]
	}
	return idx[:n]
}

// Claim takes exactly gpus for the lease l (an award the caller checked
// against its bid), or returns why not: ErrDuplicate, ErrRaced (held by a
// lease that does not yield), ErrWithdrawn, ErrUnknownGPU, ErrInvalid.
//
// A claim of silver or gold over bronze preempts those bronze leases. A
// lease that runs now takes their GPUs at once: the victims are returned
// as Preempt actions, and the new lease is not launched until they are
// released. A gold reservation that starts later than a victim's notice
// lets it run on: the victim is preempted with its notice before the
// reservation starts (a later Tick), and the reservation holds its GPUs
// for its own window only. A bronze lease may be claimed into the gap
// before a reservation (see MinBackfill): it holds its GPUs until the
// reservation starts and is preempted with its notice before then.
//
// A claim over a newcomer's unstarted award is refused as raced until
// Displace has ended it and the caller released it. A claim of GPUs
// promised to another job's live quote hold is refused as raced, so that
// the quote's award is not; the claim of the hold's own job (its renter
// and job ID) consumes the hold. A Kept claim (a lease restored from the
// provider's records) is never refused for a hold: it was co-signed
// before any live quote. The lease claimed is
// a newcomer's unless its renter is established or opts say Kept.
func (s *Scheduler) Claim(l *auction.Lease, gpus []int, now time.Time, opts ...ClaimOption) ([]Action, error) {
	var o claimOpts
	for _, opt := range opts {
		opt(&o)
	}
	if l == nil || l.JobID == "" || len(gpus) != l.GPUs || len(gpus) == 0 || hasDuplicates(gpus) {
		return nil, fmt.Errorf("%w: a claim names its lease's job and as many distinct GPUs as it leases", ErrInvalid)
	}
	end := time.Unix(l.End, 0)
	if !end.After(now) || l.End <= l.Start {
		return nil, fmt.Errorf("%w: the lease ends before it can run", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[l.JobID]; ok {
		return nil, ErrDuplicate
	}
	if s.replayed(l) {
		return nil, ErrDuplicate // that run has ended: a new run needs a new lease
	}
	notice := time.Duration(l.NoticeSec) * time.Second
	hold := holdSpan(l.Tier, Span{time.Unix(l.Start, 0), end}, now)
	victims, err := s.check(gpus, l.Tier, hold, now, notice)
	if err != nil {
		return nil, err
	}
	self := holdKey{l.Renter, l.JobID}
	if !o.kept && s.promised(self, gpus, hold, now) {
		// Another job's live quote was promised these GPUs: its award
		// must not be refused for a race with this one (a bid made
		// without a hold, or whose hold lapsed).
		return nil, ErrRaced
	}
	s.dropHold(self) // the lease holds its GPUs from here
	if l.Tier == auction.Bronze {
		if cut := s.reservedIn(gpus, nil, hold); !cut.IsZero() {
			hold.End = cut // backfill: it holds the gap, no more
		}
	}
	s.seq++
	nl := &lease{l: *l, gpus: slices.Clone(gpus), seq: s.seq, state: Awarded, claimed: now,
		deadline: now.Add(s.startDeadline), free: IntervalPrice(l) <= 0, kept: o.kept}
	s.admit(nl, o, now)
	for _, i := range gpus {
		s.gpus[i].commits = append(s.gpus[i].commits, commit{nl, hold.Start, hold.End})
	}
	var out []Action
	for _, v := range victims {
		if l.Tier == auction.Gold && hold.Start.After(now) && hold.Start.Sub(now) >= v.notice() {
			s.fit(v, now) // it runs until the reservation, then yields
			continue
		}
		for _, i := range gpus {
			if !slices.Contains(v.gpus, i) {
				continue
			}
			v.gpus = slices.DeleteFunc(v.gpus, func(g int) bool { return g == i })
			s.gpus[i].commits = slices.DeleteFunc(s.gpus[i].commits, func(c commit) bool { return c.l == v })
			s.gpus[i].draining = append(s.gpus[i].draining, v)
			v.drains = append(v.drains, i)
		}
		if v.ending == 0 {
			out = append(out, v.end(Preempt, ReasonHigherTier, string(l.Tier)))
			s.refresh(v)
		}
	}
	s.leases[l.JobID] = nl
	s.active = append(s.active, nl)
	s.fit(nl, now) // a backfill: its start deadline before the reservation's notice
	s.refresh(nl)
	return out, nil
}

func hasDuplicates(xs []int) bool {
	for i, x := range xs {
		if slices.Contains(xs[i+1:], x) {
			return true
		}
	}
	return false
}

// Commitments lists every GPU's commitments as seen at now, by GPU and
// then start.
func (s *Scheduler) Commitments(now time.Time) []Commitment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Commitment
	for i := range s.gpus {
		from := len(out)
		for _, c := range s.gpus[i].commits {
			out = append(out, Commitment{GPU: i, JobID: c.l.l.JobID, Tier: c.l.l.Tier, Span: c.at(now)})
		}
		slices.SortStableFunc(out[from:], func(a, b Commitment) int { return a.Span.Start.Compare(b.Span.Start) })
	}
	return out
}
