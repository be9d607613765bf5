package provider

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// lease is the scheduler's record of one lease, from Claim to Release.
type lease struct {
	l        auction.Lease
	gpus     []int // held now; a preempted lease loses those a higher tier took
	drains   []int // GPUs it lost but still occupies until released
	seq      uint64
	state    State
	claimed  time.Time
	deadline time.Time // the start deadline
	free     bool      // a lease that costs nothing never pauses
	launched bool      // the Launch action was given
	// newcomer: its renter was not established when it was claimed;
	// protect ends the grace in which other newcomers cannot displace it.
	newcomer bool
	protect  time.Time
	kept     bool // claimed with Kept: held again after a restart
	// superseding: its renter's new award for the job is replacing this
	// unstarted one (BeginSupersede); it cannot start from then on.
	superseding bool

	running   bool // the billing clock runs from since
	since     time.Time
	paused    bool
	pausedAt  time.Time
	pausedFor time.Duration // paused time before pausedAt, excluded from ran
	covered   time.Duration // running time the vouchers pay for

	ending Kind // the ending action given, if any; the lease then waits for Release
	why    string
	// closes: when a started bronze lease must be gone, the owner's window
	// closing or a reservation starting (see arm); zero if neither.
	closes    time.Time
	closesFor string // the Reason of closes
	// next is when Tick next has an action for this lease; zero: none
	// until another call (see Scheduler.next).
	next time.Time
}

func (l *lease) notice() time.Duration { return time.Duration(l.l.NoticeSec) * time.Second }

// ran is the billed running time at now: paused time does not count.
func (l *lease) ran(now time.Time) time.Duration {
	switch {
	case !l.running:
		return 0
	case l.paused:
		now = l.pausedAt
	}
	return now.Sub(l.since) - l.pausedFor
}

// end marks l as ending by k and returns the action that says so.
func (l *lease) end(k Kind, reason, detail string) Action {
	l.ending, l.why = k, reason
	if k == Expire {
		l.state = Expired
	}
	a := Action{Kind: k, JobID: l.l.JobID, Reason: reason, Detail: detail}
	if k == Preempt {
		a.Notice = l.notice()
	}
	return a
}

// Info is a snapshot of one active lease. Lease shares its byte slices
// with the lease given to Claim: read them, do not change them.
type Info struct {
	Lease    auction.Lease
	GPUs     []int
	State    State
	Claimed  time.Time
	Deadline time.Time // the start deadline
	Launched bool      // its job may run (the Launch action was given)
	Running  bool      // the billing clock runs
	Paused   bool
	Ran      time.Duration // billed running time, paused time excluded
	Covered  time.Duration // running time the vouchers pay for
	Ending   Kind          // the ending action already given; 0 if none
	Reason   string        // why it is ending
	// Superseding: its renter's new award for the job is replacing it
	// (BeginSupersede); it will not start.
	Superseding bool
	// WaitingFor are the leases still on its GPUs that it waits for.
	WaitingFor []string
}

// Lease is the active lease of jobID as seen at now.
func (s *Scheduler) Lease(jobID string, now time.Time) (Info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[jobID]
	if !ok {
		return Info{}, false
	}
	return s.info(l, now), true
}

// Leases lists the active leases as seen at now, in claim order.
func (s *Scheduler) Leases(now time.Time) []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.active))
	for _, l := range s.active {
		out = append(out, s.info(l, now))
	}
	return out
}

func (s *Scheduler) info(l *lease, now time.Time) Info {
	in := Info{Lease: l.l, GPUs: slices.Clone(l.gpus), State: l.state, Claimed: l.claimed, Deadline: l.deadline,
		Launched: l.launched, Running: l.running, Paused: l.paused, Ran: l.ran(now), Covered: l.covered,
		Ending: l.ending, Reason: l.why, Superseding: l.superseding}
	for _, v := range s.blockers(l) {
		in.WaitingFor = append(in.WaitingFor, v.l.JobID)
	}
	return in
}

// IsLease reports whether in is a snapshot of lease l itself, not of
// another lease of its job (one that superseded l, say): every field of
// the lease is the same.
func (in Info) IsLease(l *auction.Lease) bool { return sameLease(&in.Lease, l) }

// sameLease: a and b are one lease, field by field; two awards of a job
// whose bodies differ in any field are two leases.
func sameLease(a, b *auction.Lease) bool {
	return a.JobID == b.JobID && a.Network == b.Network && a.Renter == b.Renter && a.Provider == b.Provider &&
		a.Tier == b.Tier && a.Price == b.Price && a.GPUs == b.GPUs && a.Start == b.Start && a.End == b.End &&
		a.NoticeSec == b.NoticeSec && a.BillingSec == b.BillingSec && bytes.Equal(a.Bid, b.Bid) &&
		slices.Equal(a.GPUUUIDHash, b.GPUUUIDHash) && bytes.Equal(a.SpecHash, b.SpecHash)
}

// Ended reports how a released lease ended (Ended, Expired or
// Displaced), while it is remembered (see WithRetention).
func (s *Scheduler) Ended(jobID string) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.ended[jobID]
	return st, ok
}

// Start admits the renter's start of jobID, once: ErrStarted on any later
// start (it would run a second container on the same GPUs), ErrExpired
// from the start deadline on (ErrDisplaced for a newcomer's award that
// another award displaced), ErrEnding for a lease already being stopped
// (a bronze award preempted before it started), ErrSuperseded for one
// its renter's new award is replacing. It returns the Launch action at
// once when the job may run now; otherwise a later Tick or Release gives
// it.
func (s *Scheduler) Start(jobID string, now time.Time) ([]Action, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[jobID]
	if !ok {
		return nil, s.gone(jobID)
	}
	return s.start(l, now)
}

// StartLease is Start for lease l itself: ErrSuperseded if the lease the
// scheduler holds for l's job is another (its renter's new award replaced
// l). The check and the start are one step, so that an award is either
// started or superseded, never both (see BeginSupersede).
func (s *Scheduler) StartLease(l *auction.Lease, now time.Time) ([]Action, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.leases[l.JobID]
	switch {
	case !ok:
		return nil, s.gone(l.JobID)
	case !sameLease(&held.l, l):
		return nil, ErrSuperseded
	}
	return s.start(held, now)
}

// start is Start's step for l. Called with s.mu held.
func (s *Scheduler) start(l *lease, now time.Time) ([]Action, error) {
	switch {
	case l.state == Started:
		return nil, ErrStarted
	case l.state == Expired || !now.Before(l.deadline):
		return nil, errDisplacedOr(l, ErrExpired)
	case l.superseding:
		return nil, ErrSuperseded
	case l.ending != 0:
		return nil, fmt.Errorf("%w: %s", ErrEnding, l.why)
	case l.l.Tier == auction.Bronze && !l.kept && s.closesWithinNotice(l, now):
		// Started now, it would be preempted at once and run its notice
		// past the owner's window (its renter was slow to start it). The
		// award ends at the next tick, as one not started in time. A
		// lease claimed again after a restart (kept) may be running
		// already: it starts, and gets its notice.
		l.deadline = now
		s.refresh(l)
		return nil, fmt.Errorf("%w: the owner's window closes within the lease's %v notice", ErrExpired, l.notice())
	}
	l.state = Started
	s.arm(l, now)
	var out []Action
	if s.ready(l, now) {
		l.launched = true
		out = []Action{{Kind: Launch, JobID: l.l.JobID}}
	}
	s.refresh(l)
	return out, nil
}

// runKey names one lease of a job: its winning bid (a fresh quote's,
// signed over the renter's nonce, for every auction) and its span. Two
// claims with the same key are one award sent twice.
func runKey(l *auction.Lease) string {
	return fmt.Sprintf("%x/%d/%d", l.Bid, l.Start, l.End)
}

// replayed: l is the lease of a run of its job that has ended here.
// Called with s.mu held.
func (s *Scheduler) replayed(l *auction.Lease) bool {
	return slices.Contains(s.endedRun[l.JobID], runKey(l))
}

// maxEndedRuns bounds the ended runs remembered per job: a bid is valid
// for minutes, so a replay of a run older than the last few would be
// refused for its expired bid anyway.
const maxEndedRuns = 16

// gone is the error for a job with no active lease.
func (s *Scheduler) gone(jobID string) error {
	switch s.ended[jobID] {
	case Displaced:
		return ErrDisplaced
	case Expired:
		return ErrExpired
	case Ended:
		return ErrEnded
	}
	return ErrNoLease
}

// ready: l may launch now. Called with s.mu held.
func (s *Scheduler) ready(l *lease, now time.Time) bool {
	return l.state == Started && !l.launched && l.ending == 0 &&
		!now.Before(s.launchAt(l)) && len(s.blockers(l)) == 0
}

// launchAt is when l may launch: its start, or for a reservation (a
// lease claimed before its window) the launch lead earlier, so that its
// job is running at its start rather than a container start later.
func (s *Scheduler) launchAt(l *lease) time.Time {
	start := time.Unix(l.l.Start, 0)
	if !start.After(l.claimed) {
		return start
	}
	return later(start.Add(-s.lead), l.claimed)
}

// blockers are the leases still on l's GPUs that l must wait for: the
// preempted ones draining, and the ones committed before l's own start
// that have not been released (a backfill running into a reservation's
// start, a lease running past its end).
func (s *Scheduler) blockers(l *lease) []*lease {
	var out []*lease
	for _, i := range l.gpus {
		for _, v := range s.gpus[i].draining {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		cs := s.gpus[i].commits
		own := slices.IndexFunc(cs, func(c commit) bool { return c.l == l })
		if own < 0 {
			continue
		}
		for _, c := range cs {
			if c.l != l && c.start.Before(cs[own].start) && !slices.Contains(out, c.l) {
				out = append(out, c.l)
			}
		}
	}
	return out
}

// Running records that the job of a launched lease runs from now: its
// billing clock starts. A second call changes nothing.
func (s *Scheduler) Running(jobID string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[jobID]
	switch {
	case !ok:
		return s.gone(jobID)
	case !l.launched:
		return ErrNotLaunch
	case l.running:
		return nil
	}
	// A reservation launched ahead (see launchAt) is billed from its
	// start, not from the lead.
	l.running, l.since = true, later(now, time.Unix(l.l.Start, 0))
	s.refresh(l)
	return nil
}

// Paid reports the running time the renter's vouchers cover so far
// (cumulative: a smaller figure than before changes nothing).
func (s *Scheduler) Paid(jobID string, covered time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[jobID]
	if !ok {
		return s.gone(jobID)
	}
	s.pay(l, covered)
	return nil
}

// PaidTotal reports the best voucher's cumulative total: it covers as
// many billing intervals as it pays for in full (see CoveredBy). A
// voucher that pays for an interval of a started lease establishes its
// renter (see Establish).
func (s *Scheduler) PaidTotal(jobID string, total auction.Credits) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[jobID]
	if !ok {
		return s.gone(jobID)
	}
	covered := CoveredBy(&l.l, total)
	if total > 0 && covered > 0 && l.state == Started {
		s.establish(l.l.Renter) // paid for a started lease: see newcomer.go
	}
	s.pay(l, covered)
	return nil
}

// maxCovered bounds reported coverage, so that adding it to a time
// cannot overflow: a century is always enough.
const maxCovered = 100 * 365 * 24 * time.Hour

func (s *Scheduler) pay(l *lease, covered time.Duration) {
	covered = min(covered, maxCovered)
	if covered <= l.covered {
		return
	}
	l.covered = covered
	s.refresh(l) // a pause moves later, or a resume is due at once
}

// Release ends jobID's lease after the caller settled it and its job is
// gone: its GPUs are free and its state is Ended (Expired stays Expired).
// It returns the Launch actions of leases that waited for these GPUs.
func (s *Scheduler) Release(jobID string, now time.Time) []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[jobID]
	if !ok {
		return nil
	}
	return s.release(l, now, true)
}

// release frees l's GPUs and ends it, leaving an ended mark if mark.
// Called with s.mu held.
func (s *Scheduler) release(l *lease, now time.Time, mark bool) []Action {
	jobID := l.l.JobID
	delete(s.leases, jobID)
	s.active = slices.DeleteFunc(s.active, func(x *lease) bool { return x == l })
	s.stale = true // due may have been l's
	for _, i := range l.gpus {
		s.gpus[i].commits = slices.DeleteFunc(s.gpus[i].commits, func(c commit) bool { return c.l == l })
	}
	shared := append(slices.Clone(l.gpus), l.drains...)
	for _, i := range l.drains {
		s.gpus[i].draining = slices.DeleteFunc(s.gpus[i].draining, func(v *lease) bool { return v == l })
	}
	if l.state != Expired {
		l.state = Ended
	}
	if mark {
		s.ended[jobID] = l.state
		if l.why == ReasonDisplaced {
			s.ended[jobID] = Displaced
		}
		runs := append(s.endedRun[jobID], runKey(&l.l))
		s.endedRun[jobID] = runs[max(0, len(runs)-maxEndedRuns):]
		s.endedQ = append(s.endedQ, endedAt{jobID, now})
		for len(s.endedQ) > 0 && now.Sub(s.endedQ[0].at) > s.retention {
			if q := s.endedQ[0]; !slices.ContainsFunc(s.endedQ[1:], func(e endedAt) bool { return e.job == q.job }) {
				delete(s.ended, q.job) // forgotten only with the job's last mark
				delete(s.endedRun, q.job)
			}
			s.endedQ = s.endedQ[1:]
		}
	}
	// The leases on the same GPUs: one may have waited for l to go, and a
	// bronze one that yielded to l (a reservation) may now run on.
	var out []Action
	for _, w := range s.active {
		if !slices.ContainsFunc(w.gpus, func(g int) bool { return slices.Contains(shared, g) }) {
			continue
		}
		s.fit(w, now)
		if s.ready(w, now) {
			w.launched = true
			out = append(out, Action{Kind: Launch, JobID: w.l.JobID})
		}
		s.refresh(w)
	}
	return out
}

// BeginSupersede marks lease l, an award its renter never started, as
// being replaced by the same renter's new award for its job, and reports
// whether it did: only an Awarded lease that is l itself.
// From then on it cannot start (ErrSuperseded), so that the caller can
// record and settle its end outside any lock and then Supersede it, or
// CancelSupersede if it could not record it. The check and the mark are
// one step, so that an award is either started or superseded, never both.
func (s *Scheduler) BeginSupersede(l *auction.Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.leases[l.JobID]
	if !ok || !sameLease(&held.l, l) || held.state != Awarded || held.superseding {
		return false
	}
	held.superseding = true
	return true
}

// CancelSupersede undoes BeginSupersede of lease l: it may start again.
func (s *Scheduler) CancelSupersede(l *auction.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := s.leases[l.JobID]; ok && sameLease(&held.l, l) {
		held.superseding = false
	}
}

// Supersede releases an award that was never started so that its job can
// be claimed again: its renter never got the award's reply and won a new
// award for the job. Unlike Release it leaves no ended mark (the mark
// refuses a second claim of a job that ran, or of an award that expired).
// It reports false, and does nothing, unless the lease is Awarded; the
// check and the release are one step, so that a Start cannot come between.
// No mark is left to forget either: a mark added and deleted here would
// leave its retention entry behind, to forget the mark of a later run of
// the same job ID early.
func (s *Scheduler) Supersede(jobID string, now time.Time) ([]Action, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[jobID]
	if !ok || l.state != Awarded {
		return nil, false
	}
	return s.release(l, now, false), true
}

// closesWithinNotice reports whether the owner's window closes before
// a bronze lease started at now would have its whole notice: its
// preemption would be due at once. Outside every window it closes now.
// Called with s.mu held.
func (s *Scheduler) closesWithinNotice(l *lease, now time.Time) bool {
	closes, ok := s.windowCloses(l, now)
	return ok && closes.Before(now.Add(l.notice()))
}

// windowCloses is when the owner's window closes on l, seen at now, if
// that is before l's end (arm's preemption and start's check read it
// alike). Outside every window it closes now. Called with s.mu held.
func (s *Scheduler) windowCloses(l *lease, now time.Time) (time.Time, bool) {
	closes := s.windowEnd(now)
	return closes, s.bounded && closes.Unix() < l.l.End
}
