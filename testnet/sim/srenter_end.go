package sim

import (
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// ended is the provider's word that the job's lease is over: the renter
// records the stint, rates the provider and, unless the work is done,
// auctions what is left from the last checkpoint, never again on this
// provider (as node does after a preemption or a loss).
func (r *simRenter) ended(j *simJob, st stint) {
	if j.gang != nil {
		r.memberEnded(j, st)
		return
	}
	if j.holder != st.provider.id || j.settled {
		return // a lease the job had already left
	}
	if j.shard != nil {
		// Before the array hears of it: its next shard's round sees these
		// GPUs free at once, as node's (renter.OwnView).
		if _, spec, err := r.spec(j); err == nil {
			r.ownView(spec).Freed(st.lease)
		}
	}
	j.holder = ""
	j.payGen++ // no more vouchers for this lease
	m := r.m
	p := st.provider
	work := st.worked
	useful := time.Duration(0)
	completed, accepted := false, false
	score := 1.0
	switch {
	case p.sp.Behaviour == Skip || p.sp.Behaviour == Fake:
		// Nothing was computed. A fake's exit looks like success; the
		// renter's verification (a canary or replica) catches it with
		// VerifyShare.
		if st.why == endExited && p.sp.Behaviour == Fake {
			if unit(hash64(m.cfg.Seed, "verify", j.id, p.id)) >= m.cfg.VerifyShare {
				accepted = true
			}
		}
		score = 0
		if accepted {
			score = 1 // undetected
		}
	case st.why == endExited || st.why == endHorizon:
		// A run cut by the horizon keeps all it did, as the baselines
		// and the bound count it: the simulation stops looking, the job
		// is not stopped.
		useful = min(work, j.remaining())
		completed = useful >= j.remaining()
	default:
		useful = min(work.Truncate(m.cfg.Checkpoint), j.remaining())
		if st.why == endAbandoned || st.why == endLeaseEnd {
			score = 0
		}
	}
	if st.started {
		g := int64(st.lease.GPUs)
		startS, endS := int64(st.start/time.Second), int64(st.end/time.Second)
		ran := endS - startS
		u := min(int64(useful/time.Second)*g, ran*g)
		o := j.out()
		o.Runs = append(o.Runs, Run{Provider: p.idx, GPUs: st.lease.GPUs, Start: startS,
			End: endS, Useful: u, Lost: ran*g - u, Price: st.lease.Price, Paid: st.paid,
			Preempted: st.why == endPreempted})
		o.Done += u
		j.done += time.Duration(u/g) * time.Second
		// Honoured as the baselines judge it: the reservation's one run
		// began within a minute after its start and ran to its end (or
		// the horizon's) on real work, never preempted or given up.
		reserved := time.Duration(j.j.Start) * time.Second
		if j.j.Tier == auction.Gold && len(o.Runs) == 1 && (st.why == endExited || st.why == endHorizon) &&
			p.sp.Behaviour != Skip && p.sp.Behaviour != Fake && st.start >= reserved && st.start-reserved <= time.Minute {
			o.Honoured = true
		}
		r.trust.rate(p.id, st.paid, score)
		if st.why == endUnpaid {
			m.stats.UnpaidStops++
		}
	}
	switch {
	case completed || j.remaining() <= 0:
		r.finish(j, "")
	case accepted:
		r.finish(j, "accepted a fake result (not caught by verification)")
	case st.why == endHorizon || m.w.now >= m.stop:
		r.finish(j, "horizon")
	default:
		r.next(j, renter.RunEnd{End: runEndOf(st.why), Provider: p.id, Why: st.why.String()})
	}
}

// next has the job's lifecycle decide what follows a run that did not
// finish it: another placement, or its end.
func (r *simRenter) next(j *simJob, e renter.RunEnd) {
	if st := j.life.Ended(e); st.Done {
		r.finish(j, st.Why)
		return
	}
	r.place(j)
}

// runEndOf is the renter's view of a lease that ended before the job's
// work did: a preemption, or the provider's failure to run it through (it
// walked away, stopped for want of vouchers or telemetry, or the lease
// ran out first), or a job stopped unpaid, which node's renter fails.
func runEndOf(why endKind) renter.End {
	switch why {
	case endPreempted:
		return renter.EndPreempted
	case endUnpaid:
		return renter.EndFailed // node's renter fails a job its provider stopped unpaid
	}
	return renter.EndLost
}

// startCause is why a start the provider refused did not begin, as node's
// renter reads the provider's code: a bronze award a better claim took
// back, an award displaced for a newcomer, or anything else (expired).
func startCause(err error, tier auction.Tier) renter.StartCause {
	switch {
	case errors.Is(err, sched.ErrDisplaced):
		return renter.StartDisplaced
	case errors.Is(err, sched.ErrNoLease) && tier == auction.Bronze:
		return renter.StartTakenBack
	}
	return renter.StartOther
}

// finish records j's outcome.
func (r *simRenter) finish(j *simJob, why string) {
	if j.gang != nil {
		r.finishGang(j.gang, why)
		return
	}
	if j.shard != nil {
		r.shardEnded(j, why)
		return
	}
	if j.settled {
		return
	}
	j.settled = true
	r.settle(j.out(), why)
}

// settle records a job's outcome, once: completed when why is "".
func (r *simRenter) settle(o *Outcome, why string) {
	o.Reason = why
	if why == "" {
		o.Completed, o.Finished = true, r.m.w.secs()
	}
	r.m.stats.finished++
}
