package providing

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
)

// Reservations: a gold lease for a future window. The run waits for the
// scheduler's launch with its image already pulled; a provider that
// restarts before the window keeps the lease (Restore); one that cannot
// start the job at its window says so in its own ledger feed.

// LeaseLaunched: the job's container is being created or runs. From here
// a restart of the provider ends the lease (its container went with it);
// before it, a restart keeps the lease (see Restore).
const LeaseLaunched = "launched"

// Preparer is an executor that can fetch an image ahead of a job's start.
type Preparer interface {
	Prepare(ctx context.Context, image string) error
}

// prepare pulls a reservation's image while it waits for its window, and
// tells the renter how that went; a failure here is retried by the start.
func (pj *Provider) prepare(ctx context.Context, al *activeLease, image string, send func(wire.Event) error) {
	p, ok := pj.exec.(Preparer)
	if !ok {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := p.Prepare(pctx, image); err != nil {
		pj.log.Warn("reservation: image not pulled ahead of its start", "job", al.lease.JobID, "image", image, "err", err)
		_ = send(wire.Event{Type: "log", Log: []byte("gleaner: the image could not be pulled ahead of the reservation (the start will try again): " + err.Error() + "\n")})
		return
	}
	_ = send(wire.Event{Type: "log", Log: []byte("gleaner: image " + image + " is ready for the reservation\n")})
}

// failedReservation journals, in this provider's own feed, that it could
// not start a reservation it accepted: an outcome against itself, which
// every node's reputation view reads.
func (pj *Provider) failedReservation(al *activeLease, cause error) {
	me := pj.p.Market().Host().ID().String()
	payload, err := json.Marshal(ledger.Outcome{Lease: wire.LeaseCID(al.raw), Provider: me, Result: ledger.OutcomeFailed,
		Detail: "the provider could not start the reservation: " + cause.Error()})
	if err == nil {
		pj.record(ledger.TypeOutcome, payload)
	}
}

// Restore takes back, at start-up, the leases an earlier run held whose
// jobs never launched, so that a reservation survives a restart of its
// provider: each is claimed again on the GPUs its bid named and is
// awarded once more, for its renter to start again. Leases that had
// launched, ended while the provider was down, or whose GPUs are gone are
// recorded as interrupted. Call it once the scheduler has the inventory.
func (pj *Provider) Restore(now time.Time) (restored []string, err error) {
	type open struct {
		id  string
		rec Record
	}
	var opens []open
	err = pj.store.ForEach(func(jobID string, raw []byte) error {
		if rec, err := ReadRecord(raw); err == nil && (rec.State == LeaseAwarded || rec.State == LeaseStarted || rec.State == LeaseLaunched) {
			opens = append(opens, open{jobID, rec})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, o := range opens {
		state := LeaseInterrupted
		if o.rec.State != LeaseLaunched {
			if err := pj.reclaim(o.rec.Lease, now); err == nil {
				state = LeaseAwarded
				restored = append(restored, o.id)
			} else {
				pj.log.Info("lease of the last run not kept", "job", o.id, "why", err)
			}
		}
		if err := pj.saveLease(o.id, o.rec.Lease, state); err != nil {
			return restored, err
		}
	}
	return restored, nil
}

// reclaim claims a stored lease's GPUs again and holds it as awarded.
func (pj *Provider) reclaim(raw []byte, now time.Time) error {
	l, _, err := auction.DecodeSignedLease(raw, true)
	if err != nil {
		return err
	}
	if !time.Unix(l.End, 0).After(now) {
		return errors.New("it ended while the provider was down")
	}
	// Checked as when it was accepted: the bid has expired since, as every
	// bid soon does, but the lease that cites it has not.
	bid, _, err := auction.DecodeSignedBid(l.Bid, time.Unix(0, 0))
	if err != nil {
		return err
	}
	want, err := pj.sched.Indexes(bid.GPUHashes)
	if err != nil {
		return errors.New("its GPUs are no longer in this machine")
	}
	victims, err := pj.sched.Claim(l, want, now)
	if err != nil {
		return err
	}
	al := &activeLease{lease: l, raw: raw, hub: &eventHub{}, launch: make(chan struct{}),
		ctrl: make(chan sched.Action, 8), done: make(chan struct{})}
	pj.mu.Lock()
	pj.leases[l.JobID] = al
	pj.mu.Unlock()
	pj.do(victims)
	return nil
}
