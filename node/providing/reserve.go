package providing

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
)

// Reservations: a gold lease for a future window. The run waits for the
// scheduler's launch with its job made ready (image pulled, container
// created); a provider that
// restarts before the window keeps the lease (Restore); one that cannot
// start the job at its window says so in its own ledger feed.

// ahead is a reservation's job made ready before its window: its image
// pulled and its container created, not started (executor.Creator).
type ahead struct {
	job executor.Created // nil if the executor cannot create ahead, or failed to
	err error
}

// prepare makes a reservation's job ready while it waits for its window
// and tells the renter how that went; a failure is retried by the start
// at the window. The result arrives on the returned channel, once.
func (pj *Provider) prepare(ctx context.Context, al *activeLease, es executor.Spec, send func(wire.Event) error) <-chan ahead {
	out := make(chan ahead, 1)
	c, ok := pj.exec.(executor.Creator)
	if !ok {
		out <- ahead{}
		return out
	}
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		job, err := c.Create(pctx, es, executor.Hooks{})
		if err != nil {
			pj.log.Warn("reservation: job not made ready ahead of its start", "job", al.lease.JobID, "image", es.Image, "err", err)
			_ = send(wire.Event{Type: wire.EventLog, Log: []byte("gleaner: the job could not be made ready ahead of the reservation (the start will try again): " + err.Error() + "\n")})
			out <- ahead{err: err}
			return
		}
		_ = send(wire.Event{Type: wire.EventLog, Log: []byte("gleaner: image " + es.Image + " is ready for the reservation\n")})
		out <- ahead{job: job}
	}()
	return out
}

// discard removes a job made ready for a reservation that will not
// begin (it ended or was preempted before its window). wait: before
// returning, as a stopping node must (its Docker client closes next);
// otherwise in the background, since the making may still be pulling.
func (pj *Provider) discard(ready <-chan ahead, wait bool) {
	if pj.crashed() {
		return // left for the next start's Reconcile, as a crash would
	}
	remove := func() {
		a := <-ready
		if a.job == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(pj.bg), 30*time.Second)
		defer cancel()
		if err := a.job.Remove(ctx); err != nil {
			pj.log.Warn("a job made ready for a reservation was not removed; Reconcile will", "job", a.job.ID(), "err", err)
		}
	}
	if wait {
		remove()
		return
	}
	go remove()
}

// defaultBegin is what a container's start is assumed to take until one
// is measured: Docker's on a small machine.
const defaultBegin = 500 * time.Millisecond

// noteBegin averages how long a created job took to begin, and launches
// reservations that much before their start, so that their jobs run at
// it (auction/provider's launch lead; the lease is billed from its start).
func (pj *Provider) noteBegin(d time.Duration) {
	pj.mu.Lock()
	pj.begins = (3*pj.begins + d) / 4
	lead := pj.begins
	pj.mu.Unlock()
	pj.sched.SetLaunchLead(lead)
}

// failedReservation journals, in this provider's own feed, that it could
// not start a reservation it accepted: an outcome against itself, which
// every node's reputation view reads.
func (pj *Provider) failedReservation(al *activeLease, cause error) {
	payload, err := json.Marshal(ledger.Outcome{Lease: wire.LeaseCID(al.raw), Provider: pj.self, Result: ledger.OutcomeFailed,
		Detail: "the provider could not start the reservation: " + cause.Error()})
	if err == nil {
		pj.record(ledger.TypeOutcome, payload)
	}
}

// Restored is what Restore made of the leases the last run held.
type Restored struct {
	// Kept: leases whose jobs had not launched (reservations waiting for
	// their window), held again as awarded, for their renters to start.
	Kept []string
	// Adopted: leases whose job containers ran on through the restart,
	// held again and followed as if nothing had happened.
	Adopted []string
	// Ended: the rest, recorded interrupted and settled.
	Ended []string
}

// Holds: Restore holds jobID's lease (kept or adopted).
func (r Restored) Holds(jobID string) bool {
	return slices.Contains(r.Kept, jobID) || slices.Contains(r.Adopted, jobID)
}

// Restore takes back, at start-up, the leases an earlier run held that
// can go on. A lease whose job had launched, whose container still runs
// (a crash, kill -9, then a start within the lease) is adopted: claimed
// again on its GPUs, billed from the container's start, and followed to
// its end as run does, for its renter to attach to again; its settlement
// charges the whole run, capped by the renter's best voucher, once. A
// reservation that never launched is claimed again on the GPUs its bid
// named and is awarded once more, for its renter to start again. The
// rest (their containers gone or exited, their leases ended while the
// provider was down, their GPUs gone) are recorded interrupted and
// settled: for the time their container ran, where the engine recorded
// it, by the voucher kept with the lease. Call it once the scheduler has
// the inventory, and before serving the job protocols.
func (pj *Provider) Restore(now time.Time) (Restored, error) {
	type open struct {
		id  string
		rec Record
	}
	// The running jobs first: they hold their GPUs now, and a reservation
	// is held again around them, as it was before.
	var opens, waiting []open
	err := pj.store.ForEach(func(jobID string, raw []byte) error {
		rec, err := ReadRecord(raw)
		switch {
		case err != nil:
		case rec.State == LeaseLaunched:
			opens = append(opens, open{jobID, rec})
		case rec.State == LeaseAwarded || rec.State == LeaseStarted:
			waiting = append(waiting, open{jobID, rec})
		}
		return nil
	})
	if err != nil {
		return Restored{}, err
	}
	opens = append(opens, waiting...)
	var r Restored
	for _, o := range opens {
		if o.rec.State == LeaseLaunched {
			if pj.adopt(o.id, o.rec, now) {
				r.Adopted = append(r.Adopted, o.id)
			} else {
				r.Ended = append(r.Ended, o.id)
			}
			continue
		}
		why := pj.reclaim(o.rec.Lease, now)
		if why == nil {
			if err := pj.saveLease(o.id, o.rec.Lease, LeaseAwarded); err != nil {
				return r, err
			}
			r.Kept = append(r.Kept, o.id)
			continue
		}
		pj.log.Info("lease of the last run not kept", "job", o.id, "why", why)
		if err := pj.saveLease(o.id, o.rec.Lease, LeaseInterrupted); err != nil {
			return r, err
		}
		pj.settleInterrupted(o.rec.Lease)
		r.Ended = append(r.Ended, o.id)
	}
	return r, nil
}

// settleInterrupted journals the end of a lease the last run held and this
// one does not: every node reads a lease as open until its provider settles
// it, so without this entry the next lease on its GPUs would read as the
// GPU given twice. The vouchers went with the last run's memory; the
// renter's outcome cites its own.
func (pj *Provider) settleInterrupted(raw []byte) {
	l, _, err := auction.DecodeSignedLease(raw, true)
	if err != nil {
		return
	}
	pj.settle(newActiveLease(l, raw), nil, false)
}

// reclaim claims a stored lease's GPUs again and holds it as awarded.
func (pj *Provider) reclaim(raw []byte, now time.Time) error {
	l, _, err := auction.DecodeSignedLease(raw, true)
	if err != nil {
		return err
	}
	victims, err := pj.claimAgain(l, now)
	if err != nil {
		return err
	}
	al := newActiveLease(l, raw)
	pj.mu.Lock()
	pj.leases[l.JobID] = al
	pj.mu.Unlock()
	pj.do(victims)
	return nil
}

// claimAgain has the scheduler claim a stored lease's GPUs again, as
// awarded; the caller holds it and carries out the actions returned.
func (pj *Provider) claimAgain(l *auction.Lease, now time.Time) ([]sched.Action, error) {
	if !time.Unix(l.End, 0).After(now) {
		return nil, errors.New("it ended while the provider was down")
	}
	// Checked as when it was accepted: the bid has expired since, as every
	// bid soon does, but the lease that cites it has not.
	bid, _, err := auction.DecodeSignedBid(l.Bid, time.Unix(0, 0))
	if err != nil {
		return nil, err
	}
	want, err := pj.sched.Indexes(bid.GPUHashes)
	if err != nil {
		return nil, errors.New("its GPUs are no longer in this machine")
	}
	return pj.sched.Claim(l, want, now, sched.Kept())
}
