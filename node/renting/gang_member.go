package renting

import (
	"context"
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
	"gopkg.in/yaml.v3"
)

// awardMember records member a.Rank's job and starts its goroutine,
// which wins it an award and holds it until the gang says go.
// only, when set, is the providers its round may ask: its share of the
// book in a placement's parallel rounds.
func (r *Jobs) awardMember(run *gangRun, a renter.GangAction, only map[string]bool) error {
	ms, err := run.spec.MemberSpec(run.rec.ID, a.Rank)
	if err != nil {
		return err
	}
	y, err := yaml.Marshal(ms)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	rank := a.Rank
	j := &JobRecord{ID: a.Job, Name: run.spec.Name, State: StateAuction, Spec: string(y), Created: now, Updated: now,
		GPUs: ms.Resources.GPUs, Avoid: a.Avoid, Secrets: run.rec.Secrets, Gang: run.rec.ID, GangRank: &rank}
	// Saved before it is shared: once in r.jobs, others update it.
	if err := r.save(j); err != nil {
		return err
	}
	sig := &memberSignal{start: make(chan struct{}), release: make(chan struct{})}
	r.mu.Lock()
	r.jobs[j.ID] = j
	r.logs[j.ID] = &jobLog{}
	if run.auth != nil {
		r.registryAuth[j.ID] = run.auth
	}
	r.mu.Unlock()
	run.mu.Lock()
	run.members[j.ID] = sig
	run.mu.Unlock()
	if !r.spawn(func() { r.runMember(run, a, ms, y, sig, only) }) {
		return errStopping
	}
	return nil
}

// runMember is one member's job: one round for its award (with the
// immediate re-quotes after lost races, but no re-auction: the gang
// decides what follows a member that found no provider), the award held
// unstarted until every member holds one, then the run, followed to its
// end like any job's, which it reports to the gang rather than acting on.
func (r *Jobs) runMember(run *gangRun, a renter.GangAction, spec *auction.JobSpec, specYAML []byte, sig *memberSignal, only map[string]bool) {
	id := a.Job
	defer func() {
		run.mu.Lock()
		delete(run.members, id)
		run.mu.Unlock()
		r.mu.Lock()
		delete(r.registryAuth, id)
		r.mu.Unlock()
	}()
	exclude := map[string]bool{}
	for _, p := range a.Avoid {
		exclude[p] = true
	}
	req := renter.Request{JobID: id, SpecYAML: specYAML, Spec: spec, Exclude: exclude, Only: only, BillingSec: int64(r.billing / time.Second)}
	placed := time.Now()
	var pol renter.Policy // one round, with re-quotes after lost races: the gang decides what follows
	if a.Patient {
		pol.Patience = renter.DefaultPatience
		if a.Batch > 0 {
			// Its siblings' rounds may hold awards meanwhile, which
			// lapse unstarted after the providers' start deadline.
			pol.Patience = renter.GangSharePatience
		}
	}
	res, err := r.auc.Place(r.bg, req, pol)
	r.observeAuction(placed, err)
	if err != nil {
		if r.bg.Err() != nil {
			return
		}
		msg := "gang member not placed: " + err.Error()
		r.update(id, msg, func(j *JobRecord) { j.State, j.Error, j.Explain = StateNoMatch, msg, res.Explain })
		r.gangEvent(run, renter.GangEvent{Kind: renter.GangAwardFailed, Rank: a.Rank, Job: id, Failed: res.Explain.FailedAwards(), Why: err.Error()})
		return
	}
	lease, raw := res.Lease, res.Raw
	cid := wire.LeaseCID(raw)
	_ = r.journal.Enqueue(ledger.TypeLease, raw) // before the outcome: one ordered queue
	r.update(id, "holding an award from "+lease.Provider+" until every member of its gang holds one", func(j *JobRecord) {
		j.State, j.Explain, j.Lease, j.Provider, j.Error = StateLeased, res.Explain, raw, lease.Provider, ""
		j.LeaseCID, j.Price, j.Attempts = cid, lease.Price, 1
		j.Simulated = offerSimulated(r.m, lease.Provider)
	})
	r.gangEvent(run, renter.GangEvent{Kind: renter.GangAwarded, Rank: a.Rank, Job: id, Provider: lease.Provider})
	select {
	case <-sig.start:
	case <-sig.release:
		r.releaseMember(id, lease, cid)
		return
	case <-r.bg.Done():
		return
	}
	defer r.cancelOnRelease(id, sig)()
	out := r.followStart(id, spec, lease, raw, specYAML, run.secrets, r.memberCheckpoint(a.From), sig.roster)
	if r.bg.Err() != nil {
		return // stopping: the member is followed again after the restart
	}
	r.memberEnded(run, a, lease, cid, out)
}

// cancelOnRelease turns a stop from the gang while member id runs into a
// cancel, which the provider carries out with the lease's notice, until
// the returned func is called (the run's end).
func (r *Jobs) cancelOnRelease(id string, sig *memberSignal) (stop func()) {
	ran, stopWatch := context.WithCancel(r.bg)
	r.spawn(func() {
		select {
		case <-sig.release:
			ctx, cancel := context.WithTimeout(r.bg, 30*time.Second)
			defer cancel()
			if _, err := r.Cancel(ctx, id); err != nil {
				r.log.Warn("gang member not stopped", "job", id, "err", err)
			}
		case <-ran.Done():
		}
	})
	return stopWatch
}

// followMember follows again, after this node restarted, member a.Rank's
// job that was running (renter.GangFollow): its stream is re-attached as
// any job's is (followLease, with no start to send), and its end goes to
// the gang as a run's. A member whose record holds no lease to follow is
// reported lost, which the gang acts on as on any member's loss.
func (r *Jobs) followMember(run *gangRun, a renter.GangAction, sig *memberSignal) {
	id := a.Job
	defer func() {
		run.mu.Lock()
		delete(run.members, id)
		run.mu.Unlock()
	}()
	var spec *auction.JobSpec
	var lease *auction.Lease
	j, err := r.Get(id)
	if err == nil {
		spec, lease, err = leased(j)
	}
	if err != nil {
		why := "this node restarted and cannot follow the member again: " + err.Error()
		r.update(id, why, func(j *JobRecord) { j.State, j.Error = StateFailed, why })
		r.gangEvent(run, renter.GangEvent{Kind: renter.GangEnded, Rank: a.Rank, Job: id, End: renter.EndLost, Why: why})
		return
	}
	defer r.cancelOnRelease(id, sig)()
	out := r.followLease(id, spec, lease, j.Lease, nil, true)
	if r.bg.Err() != nil {
		return // stopping again: followed after the next start
	}
	r.memberEnded(run, a, lease, j.LeaseCID, out)
}

// memberEnded records how a member's run ended (its charge when it never
// began, its outcome entry, its checkpoint) and tells the gang.
func (r *Jobs) memberEnded(run *gangRun, a renter.GangAction, lease *auction.Lease, cid string, out runEnd) {
	id := a.Job
	var voucher []byte
	var outputs string
	if j, err := r.Get(id); err == nil {
		voucher, outputs = j.LastVoucher, j.Outputs
	}
	if out.notStarted() {
		r.update(id, "", func(j *JobRecord) {
			if j.BilledLease == cid {
				_ = recordCharge(j, 0, time.Now())
			}
		})
	}
	r.recordOutcome(cid, lease.Provider, out, voucher, outputs)
	end := out.typed(lease.Provider)
	if len(end.Checkpoint) > 0 {
		// Kept apart from the record, as a waiting job's is (wait.go): the
		// member of this rank in the next placement resumes from it.
		if err := r.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketCheckpoints, id, end.Checkpoint) }); err != nil {
			r.log.Error("gang member's checkpoint not kept", "job", id, "err", err)
		}
	}
	state := StateFailed
	switch end.End {
	case renter.EndCompleted:
		state = StateCompleted
	case renter.EndCancelled:
		state = StateCancelled
	}
	r.update(id, end.Why, func(j *JobRecord) {
		if !Terminal(j.State) || j.State == StateCancelled && state != StateCancelled {
			j.State = state
		}
		if state != StateCompleted {
			j.Error = end.Why
		}
	})
	r.gangEvent(run, renter.GangEvent{Kind: renter.GangEnded, Rank: a.Rank, Job: id, Provider: lease.Provider, End: end.End, Why: end.Why})
}

// releaseMember lets an unstarted award go: the provider ends it at
// once, and since nothing ran nothing is charged.
func (r *Jobs) releaseMember(id string, lease *auction.Lease, cid string) {
	const why = "released unstarted: its gang was not placed whole, or was cancelled"
	r.update(id, why, func(j *JobRecord) { j.State, j.Error = StateCancelled, why })
	j, err := r.Get(id)
	if err == nil {
		ctx, cancel := context.WithTimeout(r.bg, 30*time.Second)
		var ev wire.Event
		if err := r.Exchange(ctx, lease.Provider, wire.JobProto, wire.JobHead{Kind: "cancel", Lease: j.Lease}, &ev); err != nil {
			// Its start deadline ends it anyway; nothing was started.
			r.log.Warn("gang member's provider not told of the release", "job", id, "err", err)
		}
		cancel()
	}
	r.recordOutcome(cid, lease.Provider, runEnd{state: StateCancelled, result: ledger.OutcomeCancelled, why: why}, nil, "")
}

// memberCheckpoint is the checkpoint job from shipped back, nil for none.
func (r *Jobs) memberCheckpoint(from string) []byte {
	if from == "" {
		return nil
	}
	var ckpt []byte
	if err := r.store.Get(store.BucketCheckpoints, from, &ckpt); err != nil && !errors.Is(err, store.ErrNotFound) {
		r.log.Warn("gang member's checkpoint not read", "job", from, "err", err)
	}
	return ckpt
}
