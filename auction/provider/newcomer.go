package provider

import (
	"errors"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Newcomers. An award costs its renter nothing until it is started, so an
// identity with no history here, made afresh for each award, could hold
// the GPUs for free, one start deadline after another. A renter this
// provider has been paid by is established (Establish); every other one
// is a newcomer, and a newcomer's award that is not started yet is soft:
//
//   - it is displaceable by any other award once its grace has passed (an
//     honest renter starts within milliseconds of the co-signed lease),
//     and by an established renter's award at once;
//   - at most max(1, GPUs/4) of the GPUs are held by soft awards still in
//     their grace; a newcomer's award beyond that gets no grace at all, so
//     a swarm of keys cannot hold a big machine for a grace either;
//   - quotes, the load that prices them and the offer's bookings treat its
//     GPUs as free (Plan names them after free ones), so that it hides the
//     capacity from nobody.
//
// An established renter whose own award expires unstarted is a newcomer
// again. Displacement is its own step (Displace) before the claim: the
// caller settles each displaced award (charging nothing) and releases it
// before it claims and journals the new lease, because a provider whose
// feed signs an exclusive lease while another is open on the same GPU is
// convicted of leasing it twice (ledger/trust's fraud scan).

// DefaultNewcomerGrace is how long a newcomer's award is protected from
// other newcomers' awards before it is started.
const DefaultNewcomerGrace = 3 * time.Second

// NewcomerStartWindow is how long after its claim a newcomer's unstarted
// award is not named by quotes (but an established renter's, whose award
// displaces it at once), whatever its grace: its renter is most
// likely starting it (on a loaded renter, the start arrives a second or
// two after the co-signed lease). A quote that finds no other GPU is
// declined as held (ErrHeld) and its renter asks again shortly. Before
// it, a burst that filled a provider with newcomers' awards (every
// renter is one to most providers) had later quotes name those GPUs, and
// their awards displace the honest renters' unstarted awards, or wait
// out the grace and lose the race to the start: each a renter sent back
// to auction, and the burst's tail (issue 33). A swarm of keys hides a
// GPU for the window per award, as a quote hold hides it for its life.
const NewcomerStartWindow = 2 * time.Second

// MaxEstablished bounds the renters remembered as established: the least
// recently paying are forgotten first.
const MaxEstablished = 10_000

// ReasonDisplaced is the Expire action's reason for a newcomer's award
// that another award took the GPUs of.
const ReasonDisplaced = "the award was displaced: it was not started within its grace"

// Displaced is how Ended reports a released award that was displaced.
const Displaced State = "displaced"

// ErrDisplaced refuses the start of a displaced award. Its words begin as
// ErrNoLease's: the renter auctions the job again, as for any award the
// provider no longer holds.
var ErrDisplaced = errors.New("no active lease for this job: " + ReasonDisplaced + ", and another award took its GPUs")

// WithNewcomerGrace sets the newcomers' grace; 0 keeps
// DefaultNewcomerGrace, and d < 0 turns the newcomer rule off: every
// award holds its GPUs until its start deadline, whoever its renter (for
// comparisons).
func WithNewcomerGrace(d time.Duration) Option { return func(s *Scheduler) { s.grace = d } }

// SetNewcomerGrace is WithNewcomerGrace on a running scheduler; it
// changes the grace of the awards claimed from then on.
func (s *Scheduler) SetNewcomerGrace(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grace = d
	if d == 0 {
		s.grace = DefaultNewcomerGrace
	}
}

// ClaimOption qualifies a Claim.
type ClaimOption func(*claimOpts)

type claimOpts struct{ kept bool }

// Kept marks a claim that holds again a lease an earlier run of the
// provider co-signed (a restart): it is never displaced, whoever its
// renter, since its renter may take a while to find the provider again.
func Kept() ClaimOption { return func(o *claimOpts) { o.kept = true } }

// Establish records that this provider has been paid by renter: a
// voucher for a started lease or a settlement that charged something.
// Its awards are never displaced, and displace newcomers' at once.
func (s *Scheduler) Establish(renter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.establish(renter)
}

// Established reports whether renter is established (see Establish).
func (s *Scheduler) Established(renter string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.est[renter]
	return ok
}

func (s *Scheduler) establish(renter string) {
	if renter == "" {
		return
	}
	s.estSeq++
	s.est[renter] = s.estSeq
	if len(s.est) <= MaxEstablished {
		return
	}
	// Forget the least recently paying tenth at once, so that the scan
	// is paid for once per thousand renters, not once per payment.
	cut := s.estSeq - uint64(MaxEstablished*9/10)
	for r, at := range s.est {
		if at <= cut {
			delete(s.est, r)
		}
	}
}

// soft: l is a newcomer's award that has not started (see above).
// Called with s.mu held.
func (s *Scheduler) soft(l *lease) bool {
	if !l.newcomer || s.grace < 0 || l.state != Awarded || l.ending != 0 {
		return false
	}
	_, est := s.est[l.l.Renter]
	return !est
}

// starting: g carries, in span, a newcomer's unstarted award claimed less than
// NewcomerStartWindow before now. Called with s.mu held.
func (s *Scheduler) starting(g *gpu, span Span, now time.Time) bool {
	for _, c := range g.commits {
		if c.blocks(span, now) && s.soft(c.l) && now.Sub(c.l.claimed) < NewcomerStartWindow {
			return true
		}
	}
	return false
}

// displaceable: the claim of a renter (established or not) may take the
// GPUs of l at now. Called with s.mu held.
func (s *Scheduler) displaceable(l *lease, established bool, now time.Time) bool {
	return s.soft(l) && (established || !now.Before(l.protect))
}

// newcomerCap is how many GPUs soft awards in their grace may hold.
func (s *Scheduler) newcomerCap() int {
	n := 0
	for i := range s.gpus {
		if s.gpus[i].known && s.gpus[i].out == "" {
			n++
		}
	}
	return max(1, n/4)
}

// guardedGPUs counts the GPUs held by soft awards in their grace at now.
func (s *Scheduler) guardedGPUs(now time.Time) int {
	n := 0
	for _, l := range s.active {
		if s.soft(l) && now.Before(l.protect) {
			n += len(l.gpus)
		}
	}
	return n
}

// admit decides, for a lease being claimed at now, whether it is a
// newcomer's and until when its grace protects it. Called with s.mu held,
// before nl's commitments are added.
func (s *Scheduler) admit(nl *lease, o claimOpts, now time.Time) {
	if _, est := s.est[nl.l.Renter]; est || o.kept || s.grace < 0 {
		return
	}
	nl.newcomer, nl.protect = true, now
	if s.guardedGPUs(now)+len(nl.gpus) <= s.newcomerCap() {
		nl.protect = now.Add(s.grace)
	}
}

// Displace ends the soft awards that stand in the way of the claim of l
// on gpus at now and that it may take: those past their grace, or any if
// l's renter is established. It returns their Expire actions
// (ReasonDisplaced), for the caller to settle and Release before it
// claims; their GPUs are held until then. It displaces nothing, and
// returns nil, when something else would refuse the claim anyway (a lease
// that does not yield, a soft award still in its grace, an unknown or
// withdrawn GPU, a duplicate job), so no award is ended for nothing.
func (s *Scheduler) Displace(l *auction.Lease, gpus []int, now time.Time) []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone, until, ok := s.inWay(l, gpus, now)
	if !ok || !until.IsZero() {
		return nil
	}
	_, est := s.est[l.Renter]
	var out []Action
	for _, v := range gone {
		detail := "a newcomer's award, unstarted " + now.Sub(v.claimed).Round(time.Millisecond).String() + " after it was made"
		if est {
			detail += "; a renter with a paying history claimed its GPUs"
		}
		out = append(out, v.end(Expire, ReasonDisplaced, detail))
		s.refresh(v)
	}
	return out
}

// Displaces reports whether Displace(l, gpus, now) would end any award:
// a provider that commits several awards at once (node/providing's group
// commit) makes the ones it has claimed durable first, so that none is
// displaced before it was recorded.
func (s *Scheduler) Displaces(l *auction.Lease, gpus []int, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone, until, ok := s.inWay(l, gpus, now)
	return ok && until.IsZero() && len(gone) > 0
}

// GraceEnds is when the claim of l on gpus may displace the newcomers'
// awards in their grace that stand in its way, if nothing else does; zero
// if none do, or if something else would refuse it. A caller may hold a
// newcomer's award until then rather than refuse it as raced: the awards
// in its way are started within it, or never.
func (s *Scheduler) GraceEnds(l *auction.Lease, gpus []int, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, until, ok := s.inWay(l, gpus, now); ok {
		return until
	}
	return time.Time{}
}

// inWay sorts what stands in the way of a claim of l on gpus at now: the
// soft awards it may displace now (gone) and the latest end of the grace
// of those it may not yet (until; zero if none). ok is false when
// anything else would refuse the claim. Called with s.mu held.
func (s *Scheduler) inWay(l *auction.Lease, gpus []int, now time.Time) (gone []*lease, until time.Time, ok bool) {
	// What Claim refuses before it looks at the GPUs.
	if s.grace < 0 || l == nil || l.JobID == "" || len(gpus) != l.GPUs || len(gpus) == 0 || hasDuplicates(gpus) ||
		l.End <= l.Start || !time.Unix(l.End, 0).After(now) {
		return nil, time.Time{}, false
	}
	if _, active := s.leases[l.JobID]; active || s.replayed(l) {
		return nil, time.Time{}, false
	}
	_, est := s.est[l.Renter]
	hold := holdSpan(l.Tier, Span{time.Unix(l.Start, 0), time.Unix(l.End, 0)}, now)
	if s.promised(holdKey{l.Renter, l.JobID}, gpus, hold, now) {
		return nil, time.Time{}, false // Claim refuses it as raced: end no award for it
	}
	notice := time.Duration(l.NoticeSec) * time.Second
	for _, i := range gpus {
		if !s.knows(i) || s.gpus[i].out != "" {
			return nil, time.Time{}, false
		}
		for _, c := range s.gpus[i].commits {
			switch {
			case !c.blocks(hold, now), preemptible(c.l.l.Tier, l.Tier):
			case l.Tier == auction.Bronze && c.start.After(now) && backfills(c.start, now, notice):
			case s.displaceable(c.l, est, now):
				if !slices.Contains(gone, c.l) {
					gone = append(gone, c.l)
				}
			case s.soft(c.l):
				until = later(until, c.l.protect)
			default:
				return nil, time.Time{}, false
			}
		}
	}
	return gone, until, true
}

// demote makes renter a newcomer again: its award expired unstarted.
// Called with s.mu held.
func (s *Scheduler) demote(renter string) { delete(s.est, renter) }

func errDisplacedOr(l *lease, err error) error {
	if l.why == ReasonDisplaced {
		return ErrDisplaced
	}
	return err
}
