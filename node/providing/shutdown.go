package providing

import (
	"context"
	"errors"
	"time"

	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// errStopping answers quotes and awards once Shutdown has begun.
var errStopping = errors.New("this provider is stopping")

// Shutdown is a clean stop's part for the jobs: the owner gets the GPUs
// back within the notice. It takes no more quotes or awards, preempts
// every running job with its lease's notice (reason ReasonStopping: the
// job gets SIGTERM, its checkpoint travels, the lease is settled and ends
// with that reason, and its renter, told so, auctions it again), and waits
// until those runs have ended or ctx does. A job being started is called
// off (its lease is kept, as nothing ran), or, if its container began all
// the same, preempted with the running ones (see launching.go). Leases
// whose jobs have not launched (a reservation waiting for its window) are
// kept, for Restore to hold again at the next start. Call it before the
// node's context is cancelled and its host closed: the runs' last events
// must still reach their renters.
func (pj *Provider) Shutdown(ctx context.Context) error {
	// Marked under mu, where launches begin: every job that will ever run
	// here is either among these, running or launching, or never starts.
	pj.mu.Lock()
	pj.stopping.Store(true)
	var running []*activeLease
	var launching []*starting
	for _, al := range pj.leases {
		switch {
		case al.job != nil:
			running = append(running, al)
		case al.starting != nil:
			launching = append(launching, al.starting)
		}
	}
	pj.mu.Unlock()
	if pj.crashed() {
		return nil // a crash stops nothing: the runs have already let go
	}
	if len(launching) > 0 {
		pj.log.Info("stopping: the jobs being started are called off", "jobs", len(launching))
	}
	for _, st := range launching {
		st.callOff(errStopping)
	}
	for _, st := range launching {
		select {
		case <-st.done:
		case <-ctx.Done():
			pj.log.Warn("stopping before every job being started was called off", "err", ctx.Err())
			return nil
		}
		pj.mu.Lock()
		began := st.al.job != nil
		pj.mu.Unlock()
		if began {
			running = append(running, st.al)
		}
	}
	for _, al := range running {
		a := sched.Action{Kind: sched.Preempt, JobID: al.lease.JobID, Reason: sched.ReasonStopping,
			Notice: time.Duration(al.lease.NoticeSec) * time.Second}
		select {
		case al.ctrl <- a:
		default:
			pj.log.Warn("stopping: the job's run is behind; it stops with the node", "job", al.lease.JobID)
		}
	}
	if len(running) > 0 {
		pj.log.Info("stopping: the running jobs get their notice", "jobs", len(running))
	}
	for _, al := range running {
		select {
		case <-al.done:
		case <-ctx.Done():
			pj.log.Warn("stopping before every job ended within its notice", "err", ctx.Err())
			return nil
		}
	}
	return nil
}
