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
// until those runs have ended or ctx does. Leases whose jobs have not
// launched (a reservation waiting for its window) are kept, for Restore to
// hold again at the next start. Call it before the node's context is
// cancelled and its host closed: the runs' last events must still reach
// their renters.
func (pj *Provider) Shutdown(ctx context.Context) error {
	pj.stopping.Store(true)
	if pj.crashed() {
		return nil // a crash stops nothing: the runs have already let go
	}
	pj.mu.Lock()
	var running []*activeLease
	for _, al := range pj.leases {
		if al.job != nil {
			running = append(running, al)
		}
	}
	pj.mu.Unlock()
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
