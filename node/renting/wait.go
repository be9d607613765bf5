package renting

import (
	"errors"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/store"
)

// A job sent back to auction (preempted, its provider lost, its start
// failed) waits there, for up to renter.PreemptedPatience after a
// preemption. What it waits with is durable, in this node's store: the
// lifecycle's snapshot in its record and the checkpoint it resumes from
// in store.BucketCheckpoints, so that a node restarted meanwhile auctions it
// again where it left off, instead of following a lease that ended (and
// failing the job as one its provider no longer runs). A job submitted
// with secrets cannot: they were never stored.

// waitAgain records that job id goes back to auction after its run
// ended, as life decided for why: the checkpoint first (when the run
// shipped a new one), then the record, so that a record that says it
// waits always has its checkpoint.
func (r *Jobs) waitAgain(id string, life *renter.Lifecycle, newCheckpoint bool, why string) {
	if newCheckpoint {
		if err := r.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketCheckpoints, id, life.Checkpoint()) }); err != nil {
			r.log.Error("checkpoint not saved: a restart would resume the job from an older one", "job", id, "err", err)
		}
	}
	snap := life.Snapshot()
	r.update(id, why, func(j *JobRecord) { j.State, j.Error, j.Life = StateAuction, why, &snap })
}

// settled forgets, once job id has ended for good, what it kept to wait
// with; a job still going on (this node stopping) keeps it.
func (r *Jobs) settled(id string) {
	j, err := r.Get(id)
	if err != nil || !Terminal(j.State) {
		return
	}
	if j.Life != nil {
		r.update(id, "", func(j *JobRecord) { j.Life = nil })
	}
	if err := r.store.Update(func(tx *store.Tx) error { return tx.Delete(store.BucketCheckpoints, id) }); err != nil {
		r.log.Error("checkpoint not deleted", "job", id, "err", err)
	}
}

// reauction goes on, after this node restarted, with a job that was in an
// auction when it stopped: one waiting in a re-auction with its lifecycle
// rebuilt from the record, resuming from its checkpoint on whichever
// provider wins; one in its first auction from the start.
func (r *Jobs) reauction(id string) {
	j, err := r.Get(id)
	if err != nil {
		return
	}
	spec, err := auction.ParseJobSpec([]byte(j.Spec))
	if err != nil {
		r.fail(id, err)
		return
	}
	if j.Life == nil {
		// Still in its first auction: it starts over (run makes its
		// lifecycle).
		r.update(id, "this node restarted during the job's auction: auctioning it again", func(j *JobRecord) {})
		r.run(id, spec, []byte(j.Spec), nil, nil)
		return
	}
	life, err := r.restore(j, spec)
	if err != nil {
		r.fail(id, err)
		return
	}
	r.update(id, "this node restarted while the job waited to be auctioned again: auctioning it again", func(j *JobRecord) {})
	r.run(id, spec, []byte(j.Spec), nil, life)
}

// restore rebuilds j's lifecycle from its record and its checkpoint.
func (r *Jobs) restore(j *JobRecord, spec *auction.JobSpec) (*renter.Lifecycle, error) {
	var ckpt []byte
	if err := r.store.Get(store.BucketCheckpoints, j.ID, &ckpt); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return renter.Restore(spec, j.Pin, *j.Life, ckpt), nil
}

// restored is the lifecycle of j, re-attached after this node restarted,
// for what follows its run: nil for a job that cannot go on alone (its
// secrets were never stored), for one whose record predates lifecycles,
// and for replicas and canaries, which their group, service or canary
// plan decide (reattach settles them as before).
func (r *Jobs) restored(j *JobRecord, spec *auction.JobSpec) *renter.Lifecycle {
	if j.Life == nil || j.Secrets || j.Group != "" || j.Service != "" || j.Canary {
		return nil
	}
	life, err := r.restore(j, spec)
	if err != nil {
		r.log.Error("checkpoint not read: the job cannot go on after its run", "job", j.ID, "err", err)
		return nil
	}
	return life
}
