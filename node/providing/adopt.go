package providing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
)

// Adopting after a crash: a provider killed while its jobs ran (kill -9,
// a crash, the OOM killer) leaves their containers running, and their
// leases recorded launched and unsettled. Started again within the lease,
// it takes each container over (executor.Adopter), holds the lease's GPUs
// again and follows the job as its run would have: the renter, which lost
// its stream, attaches again and pays on; the lease is settled once, at
// its end, for the whole run.
//
// Nothing is billed twice: the run before the crash was never settled (a
// crash settles nothing), the adopted run is billed from the container's
// start by the scheduler's clock, and the one settlement charges that
// time capped by the best voucher, which is cumulative, so the vouchers
// signed before the crash and after it pay for one run. The lease is the
// same signed lease on the same GPUs, never a second one: no node can read
// it as a GPU leased twice.

// adoptTimeout bounds the engine's part of one adoption at start-up.
const adoptTimeout = 30 * time.Second

// adopt takes over the job of a lease that had launched before the
// restart, and reports whether it did; if not, the lease is recorded
// interrupted and settled (lost).
func (pj *Provider) adopt(jobID string, rec Record, now time.Time) bool {
	l, _, err := auction.DecodeSignedLease(rec.Lease, true)
	if err != nil {
		pj.log.Warn("lease of the last run unreadable: recorded interrupted", "job", jobID, "err", err)
		if err := pj.saveLease(jobID, rec.Lease, LeaseInterrupted); err != nil {
			pj.log.Warn("lease state not saved", "job", jobID, "err", err)
		}
		return false
	}
	al := newActiveLease(l, rec.Lease)
	m := newMeter(l, wire.LeaseCID(rec.Lease))
	if len(rec.Voucher) > 0 {
		m.take(rec.Voucher)
	}
	ad, ok := pj.exec.(executor.Adopter)
	if !ok {
		pj.lost(al, m, 0, errors.New("this node's executor cannot adopt the jobs of an earlier run"))
		return false
	}
	ctx, cancel := context.WithTimeout(pj.bg, adoptTimeout)
	defer cancel()
	job, err := ad.Adopt(ctx, pj.execID(jobID))
	var exited *executor.ExitedError
	switch {
	case errors.As(err, &exited):
		// It ended while nobody followed it: billed for the time it ran.
		pj.lost(al, m, ranBetween(l, exited.Result.StartedAt, exited.Result.FinishedAt), err)
		return false
	case err != nil:
		pj.lost(al, m, 0, err) // how long it ran is unknown: nothing is charged
		return false
	}
	started := job.StartedAt()
	if err := pj.holdAdopted(al, now); err != nil {
		// Its lease cannot be held again (it ended while the provider
		// was down, its GPUs are gone): the job must not run on.
		if rerr := job.Remove(ctx); rerr != nil {
			pj.log.Warn("job container not removed; Reconcile will", "job", jobID, "err", rerr)
		}
		pj.lost(al, m, ranBetween(l, started, now), err)
		return false
	}
	pj.running(al, job, m, started)
	pj.rejoinGang(ctx, al, rec.Gang, job)
	if job.Paused() {
		// Frozen by the last run for want of a voucher: the scheduler
		// decides again, by the vouchers it has now.
		if err := job.Resume(ctx); err != nil {
			pj.log.Warn("adopted job not resumed", "job", jobID, "err", err)
		}
	}
	if err := pj.saveLease(jobID, rec.Lease, LeaseLaunched); err != nil {
		pj.log.Warn("lease state not saved", "job", jobID, "err", err)
	}
	pj.log.Info("adopted the running job of the last run", "job", jobID, "renter", l.Renter, "since", started.UTC().Format(time.RFC3339))
	pj.spawn(func() {
		hb := pj.heartbeats(al.hub.send)
		defer hb.stop()
		defer pj.leaveGang(al) // rejoined above, if a gang member
		fctx, fcancel := context.WithDeadline(pj.bg, time.Unix(l.End, 0))
		defer fcancel()
		pj.follow(fctx, al, job, m)
	})
	pj.awaitRenter(al, sched.Grace(l))
	return true
}

// reasonRenterGone is why an adopted job whose renter did not come back
// is stopped (awaitRenter).
const reasonRenterGone = "its renter did not come back after the provider restarted"

// awaitRenter stops an adopted job as unpaid if its renter has not come
// back (attached again) within grace, the lease's voucher grace. A renter
// that is alive attaches within seconds of the restart (it comes back to
// a lost provider with backoff, node/renting/follow.go); one that is gone
// never pays again, and its job must not hold the GPUs meanwhile. Left
// to the scheduler's billing alone it would: the adopted run is paused
// only once the last voucher's interval and the grace have run out, and
// stopped after the patience of two intervals more, up to a quarter of
// an hour at the default interval.
func (pj *Provider) awaitRenter(al *activeLease, grace time.Duration) {
	time.AfterFunc(grace, func() {
		select {
		case <-al.back:
			return
		case <-al.done:
			return // ended or released meanwhile
		default:
		}
		if pj.crashed() || pj.bg.Err() != nil {
			return
		}
		pj.log.Warn("stopping an adopted job: "+reasonRenterGone, "job", al.lease.JobID, "renter", al.lease.Renter, "grace", grace)
		a := sched.Action{Kind: sched.StopUnpaid, JobID: al.lease.JobID, Reason: reasonRenterGone}
		select {
		case al.ctrl <- a:
		default:
			pj.log.Warn("the adopted job's run is behind; it is not stopped yet", "job", al.lease.JobID)
		}
	})
}

// holdAdopted claims an adopted lease's GPUs again and has the scheduler
// start and launch it at once: its job runs already.
func (pj *Provider) holdAdopted(al *activeLease, now time.Time) error {
	victims, err := pj.claimAgain(al.lease, now)
	if err != nil {
		return err
	}
	pj.mu.Lock()
	pj.leases[al.lease.JobID] = al
	pj.mu.Unlock()
	acts, err := pj.sched.Start(al.lease.JobID, now)
	if err != nil {
		pj.forget(al.lease.JobID)
		return fmt.Errorf("the scheduler would not start it again: %w", err)
	}
	pj.do(victims)
	pj.do(acts) // its Launch closes al.launch
	select {
	case <-al.launch:
		return nil
	default:
		pj.forget(al.lease.JobID)
		return errors.New("the scheduler would not launch it again at once")
	}
}

// lost records a lease of the last run that cannot go on as interrupted,
// then settles it for ran by the best voucher kept with it.
func (pj *Provider) lost(al *activeLease, m *meter, ran time.Duration, why error) {
	pj.log.Info("lease of the last run not kept", "job", al.lease.JobID, "why", why)
	if err := pj.saveLease(al.lease.JobID, al.raw, LeaseInterrupted); err != nil {
		pj.log.Warn("lease state not saved", "job", al.lease.JobID, "err", err)
	}
	total, best := m.settled()
	pj.settleRun(al, total, best, ran, false, "")
}

// ranBetween is the billable part of a run from start to end: within the
// lease's window.
func ranBetween(l *auction.Lease, start, end time.Time) time.Duration {
	if s := time.Unix(l.Start, 0); start.Before(s) {
		start = s
	}
	if e := time.Unix(l.End, 0); end.After(e) {
		end = e
	}
	if start.IsZero() || !end.After(start) {
		return 0
	}
	return end.Sub(start)
}

// execID is the executor's job ID of a lease's job.
func (pj *Provider) execID(jobID string) string { return pj.tag + "-" + jobID }
