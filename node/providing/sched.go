package providing

import (
	"context"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// Driving the scheduler: one loop ticks it on the wall clock, and do
// carries out the actions it returns. The scheduler decides; this file
// only delivers.

// tickEvery bounds the tick loop's sleep, so that the owner's windows are
// read again at least this often.
const tickEvery = time.Second

// Run ticks the scheduler when an action falls due, when poked, and
// at least every tickEvery, until ctx ends. It also hands the scheduler
// the windows of the offer as it stands.
func (pj *Provider) Run(ctx context.Context) {
	var windowsOf *auction.Offer
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-pj.kick:
		}
		now := time.Now()
		offer := pj.p.Current()
		if offer != nil && offer != windowsOf {
			pj.sched.SetWindows(offer.Windows, now)
			pj.sched.SetNotice(time.Duration(offer.Policy.PreemptNotice) * time.Second)
			windowsOf = offer
		}
		pj.do(pj.sched.Tick(now))
		wait := tickEvery
		if due := pj.sched.Due(); !due.IsZero() {
			wait = min(max(time.Until(due), 0), tickEvery)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// poke wakes the tick loop.
func (pj *Provider) poke() {
	select {
	case pj.kick <- struct{}{}:
	default:
	}
}

// do carries out the scheduler's actions. A started lease's run gets them
// on its ctrl channel; a lease that no run owns yet ends here.
func (pj *Provider) do(acts []sched.Action) {
	for _, a := range acts {
		al := pj.lookup(a.JobID)
		if al == nil {
			continue
		}
		if a.Kind == sched.Launch {
			al.launchOnce.Do(func() { close(al.launch) })
			continue
		}
		// A lease the scheduler has started belongs to its run (which may
		// be about to read ctrl); any other has no run to tell.
		info, _ := pj.sched.Lease(a.JobID, time.Now())
		owned := info.State == sched.Started && a.Kind != sched.Expire
		switch {
		case owned:
			select {
			case al.ctrl <- a:
			default:
				pj.log.Warn("scheduler action dropped: the run is behind", "job", a.JobID, "action", a.Kind.String())
			}
		case a.Kind.Ends():
			// Expired, or preempted before its renter started it: settle
			// and free at once, in that order. The record is the
			// scheduler's state: an Expire action (also a displacement's)
			// leaves the lease Expired.
			switch {
			case a.Reason == sched.ReasonDisplaced:
				pj.log.Info("award displaced: a newcomer's, not started", "job", a.JobID, "renter", al.lease.Renter, "why", a.Detail)
			case a.Kind == sched.Expire:
				pj.log.Info("award expired: never started", "job", a.JobID, "renter", al.lease.Renter)
			}
			if err := pj.saveLease(a.JobID, al.raw, endedRecord(info.State)); err != nil {
				pj.log.Warn("lease state not saved", "job", a.JobID, "err", err)
			}
			pj.settle(al, nil, false)
			pj.release(a.JobID)
		}
	}
}
