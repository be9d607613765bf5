package provider

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Payment per interval: before each billing interval the renter signs a
// cumulative voucher for it; the provider pauses the job when no voucher
// covers the time run plus a grace, resumes it when one does, and stops it
// when its patience runs out. Neither side risks more than one interval
// plus the grace.

// IntervalPrice is what one billing interval of l costs.
func IntervalPrice(l *auction.Lease) auction.Credits {
	return auction.Credits(int64(l.Price) * int64(l.GPUs) * l.BillingSec / 3600)
}

// CoveredBy is the running time a cumulative voucher total pays for:
// whole billing intervals only. A lease that costs nothing is always
// covered.
func CoveredBy(l *auction.Lease, total auction.Credits) time.Duration {
	per := IntervalPrice(l)
	if per <= 0 {
		return time.Duration(1<<62 - 1)
	}
	return time.Duration(int64(total)/int64(per)) * time.Duration(l.BillingSec) * time.Second
}

// Grace is how late a voucher may be before the job is paused: half an
// interval, at most 30 s.
func Grace(l *auction.Lease) time.Duration {
	return min(time.Duration(l.BillingSec)*time.Second/2, 30*time.Second)
}

// Patience is how long a paused job waits for payment before it is
// stopped as unpaid: two billing intervals.
func Patience(l *auction.Lease) time.Duration { return 2 * time.Duration(l.BillingSec) * time.Second }

// Kind is what an Action asks the caller to do.
type Kind uint8

// Action kinds. The ending kinds (see Ends) are given at most once per
// lease; after one, the lease gets no other action, and the caller stops
// its job if it runs, settles and calls Release.
const (
	Launch     Kind = iota + 1 // start the job's container, then call Running
	Expire                     // the award was not started in time (state Expired)
	Pause                      // no voucher covers the time run plus the grace
	Resume                     // the vouchers cover the time run again
	StopUnpaid                 // paused for longer than the patience: stop, rate the renter unpaid
	Preempt                    // stop a bronze job with Action.Notice; ship its checkpoint
	StopAtEnd                  // the lease's end is reached
)

var kindNames = [...]string{"none", "launch", "expire", "pause", "resume", "stop-unpaid", "preempt", "stop-at-end"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Ends reports whether k ends its lease.
func (k Kind) Ends() bool { return k == Expire || k == StopUnpaid || k == Preempt || k == StopAtEnd }

// Reasons an action gives; Action.Detail adds the particulars.
const (
	ReasonHigherTier = "a higher tier needs the GPU"            // Detail: that tier
	ReasonReclaimed  = "the owner reclaimed the GPU"            // Detail: the owner's reason
	ReasonHardLimit  = "the GPU is over the owner's hard limit" // Detail: which limit
	ReasonWindowEnd  = "the owner's availability window closes" // Detail: when
	ReasonReserved   = "a reservation starts on the GPU"        // Detail: when
	ReasonUnpaid     = "no voucher covers the time run"
	ReasonNotStarted = "the award was not started in time"
	ReasonLeaseEnd   = "the lease's end is reached"
	ReasonStopping   = "the provider's daemon is stopping"
	// ReasonEscaped: a process of the job computes on a GPU its lease did
	// not give it (its container escaped its device restriction). Every
	// tier stops, with no notice (a Preempt whose Notice is 0: killed at
	// once, no checkpoint to wait for). Detail: which process on which GPU.
	ReasonEscaped = "the job escaped its GPUs"
	// ReasonGPUFault: the driver reported the GPU faulty (an Xid critical
	// error, a rise in uncorrected ECC errors). Every tier stops, and the
	// GPU stays withdrawn until the provider's node restarts. Detail:
	// which error.
	ReasonGPUFault = "the GPU reported a hardware fault"
)

// Action is one thing the scheduler asks its caller to do for a lease.
type Action struct {
	Kind   Kind
	JobID  string
	Reason string        // one of the Reason constants
	Detail string        // particulars, may be empty
	Notice time.Duration // Preempt: the notice the job gets; 0 kills it at once
}

// Message is the reason as a person reads it.
func (a Action) Message() string {
	if a.Detail == "" {
		return a.Reason
	}
	return a.Reason + ": " + a.Detail
}

// Due is when Tick next has an action, if nothing else is called
// before; zero if none until another call. It may be already past: tick
// now (a voucher came for a paused job).
func (s *Scheduler) Due() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dueAt()
}

// dueAt is the earliest next of the active leases. Called with s.mu held.
func (s *Scheduler) dueAt() time.Time {
	if s.stale {
		s.due, s.stale = time.Time{}, false
		for _, l := range s.active {
			if !l.next.IsZero() && (s.due.IsZero() || l.next.Before(s.due)) {
				s.due = l.next
			}
		}
	}
	return s.due
}

// Tick returns what to do at now, in claim order: expire awards not
// started by their deadline, launch what may run, pause, resume, stop as
// unpaid, preempt bronze before the owner's window closes, stop at the
// lease's end. Running time excludes paused time. Each action is given
// once for the state it changes (a Pause is not repeated while paused).
// Before Due it costs a comparison, so calling it every second is cheap.
func (s *Scheduler) Tick(now time.Time) []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneHolds(now) // lapsed quote holds, so memory does not wait for the next quote
	if due := s.dueAt(); due.IsZero() || now.Before(due) {
		return nil
	}
	var out []Action
	for _, l := range s.active {
		if l.next.IsZero() || now.Before(l.next) {
			continue
		}
		// A lease can owe more than one action at one instant (launch,
		// then preempt at a closed window); each step changes its state.
		for range 4 {
			a, ok := s.step(l, now)
			if !ok {
				break
			}
			out = append(out, a)
		}
		s.refresh(l)
	}
	return out
}

// step gives l's next action at now, if any, and records its effect.
func (s *Scheduler) step(l *lease, now time.Time) (Action, bool) {
	if l.ending != 0 {
		return Action{}, false
	}
	if l.state == Awarded {
		if !now.Before(l.deadline) {
			if !l.kept {
				s.demote(l.l.Renter) // an award left unstarted: a newcomer again
			}
			return l.end(Expire, ReasonNotStarted, ""), true
		}
		return Action{}, false
	}
	if !now.Before(time.Unix(l.l.End, 0)) {
		return l.end(StopAtEnd, ReasonLeaseEnd, ""), true
	}
	if !l.closes.IsZero() && !now.Before(l.closes.Add(-l.notice())) {
		return l.end(Preempt, l.closesFor, l.closes.UTC().Format(time.RFC3339)), true
	}
	if !l.launched {
		if s.ready(l, now) {
			l.launched = true
			return Action{Kind: Launch, JobID: l.l.JobID}, true
		}
		return Action{}, false
	}
	if !l.running || l.free {
		return Action{}, false
	}
	switch ran := l.ran(now); {
	case !l.paused && ran > l.covered+Grace(&l.l):
		l.paused, l.pausedAt = true, now
		return Action{Kind: Pause, JobID: l.l.JobID, Reason: ReasonUnpaid}, true
	case l.paused && l.covered >= ran:
		l.paused, l.pausedFor = false, l.pausedFor+now.Sub(l.pausedAt)
		return Action{Kind: Resume, JobID: l.l.JobID}, true
	case l.paused && now.Sub(l.pausedAt) > Patience(&l.l):
		return l.end(StopUnpaid, ReasonUnpaid, ""), true
	}
	return Action{}, false
}

// arm records, for a started bronze lease, when it must be gone: the
// close of the owner's window around now if it outlasts it, or the start
// of a reservation on its GPUs if that comes first. Windows do not move
// until SetWindows, and reservations until a claim or release on its
// GPUs, each of which arms it again, so the answer holds.
// Called with s.mu held.
func (s *Scheduler) arm(l *lease, now time.Time) {
	l.closes, l.closesFor = time.Time{}, ""
	if l.l.Tier != auction.Bronze || l.state != Started {
		return
	}
	if closes, ok := s.windowCloses(l, now); ok {
		l.closes, l.closesFor = closes, ReasonWindowEnd
	}
	end := time.Unix(l.l.End, 0)
	if r := s.reservedIn(l.gpus, l, Span{l.claimed, end}); !r.IsZero() && (l.closes.IsZero() || r.Before(l.closes)) {
		l.closes, l.closesFor = r, ReasonReserved
	}
}

// refresh recomputes l.next after a change to l, and keeps due the
// earliest next (or marks it stale). Called with s.mu held.
func (s *Scheduler) refresh(l *lease) {
	old := l.next
	l.next = s.next(l)
	switch {
	case l.next.Equal(old):
	case !l.next.IsZero() && (old.IsZero() || l.next.Before(old)): // earlier
		if !s.stale && (s.due.IsZero() || l.next.Before(s.due)) {
			s.due = l.next
		}
	default: // later or never: due may have been old's
		s.stale = true
	}
}

// next is the first instant at which step acts for l unless another call
// comes first; zero if none. It must agree with step exactly: an early
// next costs a wasted Tick, a late one a late action.
func (s *Scheduler) next(l *lease) time.Time {
	if l.ending != 0 {
		return time.Time{}
	}
	if l.state == Awarded {
		return l.deadline
	}
	t := time.Unix(l.l.End, 0)
	earliest := func(u time.Time) {
		if u.Before(t) {
			t = u
		}
	}
	if !l.closes.IsZero() {
		earliest(l.closes.Add(-l.notice()))
	}
	switch {
	case !l.launched:
		if len(s.blockers(l)) == 0 {
			earliest(s.launchAt(l)) // else Release launches it
		}
	case !l.running || l.free:
	case !l.paused:
		earliest(l.since.Add(l.pausedFor + l.covered + Grace(&l.l) + time.Nanosecond))
	case l.covered >= l.ran(l.pausedAt):
		earliest(l.pausedAt) // already past: resume at the next Tick
	default:
		earliest(l.pausedAt.Add(Patience(&l.l) + time.Nanosecond))
	}
	return t
}
