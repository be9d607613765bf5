package sim

import (
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
)

// A gang member's end, its placement's accounting and the gang's own end
// (srenter_gang.go drives the gang).

// memberEnded is the provider's word that a member's lease is over: the
// run is kept for its placement's accounting and the gang told.
func (r *simRenter) memberEnded(mj *simJob, st stint) {
	sg := mj.gang
	if mj.holder != st.provider.id {
		return
	}
	mj.holder = ""
	mj.payGen++
	p := st.provider
	end, useful, score := renter.EndLost, time.Duration(0), 1.0
	switch {
	case p.sp.Behaviour == Skip || p.sp.Behaviour == Fake:
		// Nothing was computed; a fake exit the verification misses
		// passes for a completion, with no progress behind it.
		score = 0
		if st.why == endExited && p.sp.Behaviour == Fake && unit(hash64(r.m.cfg.Seed, "verify", mj.id, p.id)) >= r.m.cfg.VerifyShare {
			end, score = renter.EndCompleted, 1
		}
	case st.why == endExited:
		useful = min(st.worked, mj.remaining())
		end = renter.EndCompleted
	case st.why == endHorizon:
		// Cut by the horizon: all it did counts, as in the baselines.
		useful = min(st.worked, mj.remaining())
	default:
		useful = min(st.worked.Truncate(r.m.cfg.Checkpoint), mj.remaining())
		if st.why == endAbandoned || st.why == endLeaseEnd {
			score = 0
		}
	}
	switch {
	case !st.started:
		end = renter.EndNotStarted
	case st.why == endGangStop:
		end = renter.EndCancelled
	case st.why == endPreempted || st.why == endUnpaid:
		end = runEndOf(st.why)
	}
	if st.started {
		sg.stints = append(sg.stints, gangStint{st: st, useful: useful})
		r.trust.rate(p.id, st.paid, score)
		if st.why == endUnpaid {
			r.m.stats.UnpaidStops++
		}
	}
	// Accounted before the gang is told: its next placement's members
	// resume from what this one kept.
	r.gangAccount(sg)
	if st.why == endHorizon || r.m.w.now >= r.m.stop {
		r.finishGang(sg, "horizon")
		return
	}
	r.gangStep(sg, renter.GangEvent{Kind: renter.GangEnded, Rank: mj.rank, Job: mj.id, Provider: p.id, End: end, Why: st.why.String()})
}

// gangAccount records the current placement's runs once none of its
// started members still runs (one released unstarted holds nothing that
// counts, and a next placement starts only after every run ended): each member kept the placement's least
// checkpointed progress (none when a member never ran: a gang steps
// together), the rest of its run is lost. A placement a member's
// preemption stopped marks every run preempted: the siblings' losses
// are the gang's preemption's too.
func (r *simRenter) gangAccount(sg *simGang) {
	if len(sg.stints) == 0 {
		return
	}
	for _, mj := range sg.members {
		if mj.holder != "" && mj.started {
			return
		}
	}
	kept := sg.stints[0].useful
	preempted := false
	for _, s := range sg.stints {
		kept = min(kept, s.useful)
		preempted = preempted || s.st.why == endPreempted
	}
	if len(sg.stints) < sg.j.Members {
		kept = 0 // a member never ran: no step was taken
	}
	o := sg.out()
	for _, s := range sg.stints {
		st := s.st
		g := int64(st.lease.GPUs)
		startS, endS := int64(st.start/time.Second), int64(st.end/time.Second)
		ran := endS - startS
		u := min(int64(kept/time.Second)*g, ran*g)
		o.Runs = append(o.Runs, Run{Provider: st.provider.idx, GPUs: st.lease.GPUs, Start: startS, End: endS,
			Useful: u, Lost: ran*g - u, Price: st.lease.Price, Paid: st.paid, Preempted: preempted})
		o.Done += u
	}
	// Each member's share in whole seconds, as recorded, so that the
	// gang's progress and its runs' sum agree.
	sg.done += time.Duration(int64(kept/time.Second)) * time.Second
	sg.stints = sg.stints[:0]
}

// gangSettle acts on the gang's state once its members hold nothing: a
// completion, or a gang the real code gave up on, submitted again while
// its renter still wants it.
func (r *simRenter) gangSettle(sg *simGang) {
	r.gangAccount(sg)
	if sg.settled || sg.g == nil || !sg.g.Ended() {
		return
	}
	for _, mj := range sg.members {
		if mj.holder != "" {
			return // a member still stopping: its run is to be counted first
		}
	}
	state, why := sg.g.State()
	m := r.m
	switch {
	case state == renter.GangCompleted && sg.done >= time.Duration(sg.j.Duration)*time.Second:
		r.finishGang(sg, "")
	case state == renter.GangCompleted:
		r.finishGang(sg, "accepted a fake result (not caught by verification)")
	case m.w.now+m.cfg.Retry < m.stop && (sg.ran || m.w.now+m.cfg.Retry <= time.Duration(sg.j.Submit)*time.Second+m.cfg.Patience):
		sg.g = nil
		m.w.after(m.cfg.Retry, func() { r.submitGang(sg) })
	default:
		if !sg.ran {
			why = "no capacity: " + why
		}
		r.finishGang(sg, why)
	}
}

// finishGang records the gang job's outcome.
func (r *simRenter) finishGang(sg *simGang, why string) {
	if sg.settled {
		return
	}
	sg.settled = true
	r.settle(sg.out(), why)
}
