package sim

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// do carries out the scheduler's actions as node's adapter would.
func (p *simProvider) do(acts []sched.Action) {
	for _, a := range acts {
		pl := p.leases[a.JobID]
		if pl == nil {
			continue
		}
		switch a.Kind {
		case sched.Launch:
			gen := pl.gen
			p.m.w.after(p.m.cfg.Pull, func() { p.running(a.JobID, gen) })
		case sched.Pause:
			p.pause(pl)
		case sched.Resume:
			p.resume(pl)
		case sched.Expire:
			p.end(a.JobID, endExpired)
		case sched.StopUnpaid:
			p.end(a.JobID, endUnpaid)
		case sched.StopAtEnd:
			p.end(a.JobID, endLeaseEnd)
		case sched.Preempt:
			// The job gets its notice (SIGTERM, grace) and ships its
			// checkpoint; the renter hears at once.
			// The container runs on through the notice and may finish
			// its work in it (its planned exit still stands).
			pl.ending = true
			p.m.w.after(a.Notice, func() { p.end(a.JobID, endPreempted) })
		}
	}
}

// running is the container up after its pull: the billing clock starts.
func (p *simProvider) running(jobID string, gen int) {
	pl := p.leases[jobID]
	if pl == nil || pl.gen != gen || pl.ending {
		return
	}
	if err := p.sched.Running(jobID, p.m.w.Now()); err != nil {
		return
	}
	pl.running, pl.since, pl.start = true, p.m.w.now, p.m.w.now
	pl.job.renter.running(pl.job, p, pl.l)
	p.planExit(pl)
	if p.sp.Behaviour == Abandon {
		// It walks away somewhere in the first half of the work.
		f := 0.1 + 0.4*unit(hash64(p.m.cfg.Seed, "abandon", jobID, p.id))
		at := time.Duration(f * float64(pl.job.remaining()))
		g := pl.gen
		p.m.w.after(at, func() {
			if pl.gen == g && !pl.ending {
				p.end(jobID, endAbandoned)
			}
		})
	}
	p.reschedule()
}

// planExit schedules the job's own exit when its remaining work is done,
// counting from now; a pause or a stop bumps gen and voids it.
func (p *simProvider) planExit(pl *provLease) {
	pl.gen++
	g := pl.gen
	left := pl.job.remaining() - pl.worked
	p.m.w.after(max(left, 0), func() {
		if pl.gen == g && p.leases[pl.l.JobID] == pl && !pl.paused {
			p.end(pl.l.JobID, endExited)
		}
	})
}

func (p *simProvider) pause(pl *provLease) {
	if pl.paused || !pl.running {
		return
	}
	pl.worked += p.m.w.now - pl.since
	pl.paused = true
	pl.gen++
}

func (p *simProvider) resume(pl *provLease) {
	if !pl.paused {
		return
	}
	pl.paused, pl.since = false, p.m.w.now
	p.planExit(pl)
}

// endKind is why a lease's job stopped.
type endKind uint8

const (
	endExited    endKind = iota + 1 // the job finished its work (or says so)
	endPreempted                    // bronze, preempted with notice
	endUnpaid                       // stopped for want of vouchers
	endLeaseEnd                     // the lease's end came first
	endExpired                      // never started in time
	endAbandoned                    // the provider walked away
	endStopped                      // the renter stopped it
	endHorizon                      // the simulation ended
	endGangStop                     // the renter stopped a gang's member (or released its award) with its gang
)

func (k endKind) String() string {
	switch k {
	case endExited:
		return "exited"
	case endPreempted:
		return "preempted"
	case endUnpaid:
		return "stopped unpaid"
	case endLeaseEnd:
		return "the lease ended first"
	case endExpired:
		return "not started in time"
	case endAbandoned:
		return "the provider walked away"
	case endStopped:
		return "stopped by the renter: no telemetry"
	case endHorizon:
		return "the simulation ended"
	case endGangStop:
		return "stopped with its gang"
	}
	return "ended"
}

// end stops a lease's job, settles (the best voucher, capped by the time
// run at the lease's price), releases its GPUs and tells the renter.
func (p *simProvider) end(jobID string, why endKind) {
	pl := p.leases[jobID]
	if pl == nil {
		return
	}
	delete(p.leases, jobID)
	pl.ending = true
	pl.gen++
	now := p.m.w.now
	if why == endPreempted && now >= p.m.stop {
		// A window the supply clips at the horizon closes there, and
		// the scheduler gives its notice before: that is the run's end,
		// not an owner's reclaim. Cut by the horizon, as the baselines
		// count a bronze run whose window ends with the horizon.
		why = endHorizon
	}
	worked := pl.worked
	if pl.running && !pl.paused {
		worked += now - pl.since
	}
	var ran time.Duration
	if pl.running {
		ran = now - pl.start
	}
	l := pl.l
	// Settled as node settles: the billed running time (paused time
	// excluded) at the lease's price, capped by the best voucher.
	var billed time.Duration
	if in, ok := p.sched.Lease(jobID, p.m.w.Now()); ok {
		billed = in.Ran
	}
	settled, _ := sched.Charge(l, billed, pl.total)
	if why == endAbandoned {
		// An abandoner walks away with the vouchers it holds: the
		// interval paid ahead is its gain.
		settled = pl.total
	}
	if settled > 0 {
		p.m.feedAppend()
	}
	p.do(p.sched.Release(jobID, p.m.w.Now()))
	p.changed()
	p.reschedule()
	st := stint{provider: p, lease: l, start: pl.start, end: now, ran: ran, worked: worked, paid: settled,
		started: pl.running, why: why}
	pl.job.renter.ended(pl.job, st)
}

// stint is one lease's run as the renter learns of it.
type stint struct {
	provider   *simProvider
	lease      *auction.Lease
	start, end time.Duration
	ran        time.Duration // the container's life
	worked     time.Duration // of it, unpaused
	paid       auction.Credits
	started    bool
	why        endKind
}
