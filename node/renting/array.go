package renting

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
	"gopkg.in/yaml.v3"
)

// A job array (the spec's array:) is one record here, in
// store.BucketArrays, and a job per shard attempt in BucketJobs, each an
// ordinary job of this package (its own auction, lease, preemption and
// re-auctions from its checkpoint) whose record names the array and its
// shard. What to submit next and when the array has failed is decided by
// renter.Array, without I/O; a driver goroutine per array (drive) feeds
// it the shards' job states and carries out its actions. The array's
// snapshot is saved before the jobs it names are submitted, and a shard
// job's ID is derived from the array's, so a node that stopped between
// the two submits the same job again when it restarts.

// ArrayRecord is the renter's durable view of one job array.
type ArrayRecord struct {
	ID          string               `json:"id"`
	Name        string               `json:"name"`
	Spec        string               `json:"spec"`
	Created     time.Time            `json:"created"`
	Updated     time.Time            `json:"updated"`
	EndedAt     *time.Time           `json:"ended_at,omitempty"`
	Shards      int                  `json:"shards"`
	MaxParallel int                  `json:"max_parallel"`
	Pin         string               `json:"pin,omitempty"`
	Secrets     bool                 `json:"secrets,omitempty"` // submitted with secrets or registry credentials, kept in memory only
	Life        renter.ArraySnapshot `json:"array"`
	// Split is each shard's part of the input array.split deals, by
	// shard index (array_split.go); nil without a split.
	Split []ShardInput `json:"split,omitempty"`
}

// arrayRun is one array's driver state.
type arrayRun struct {
	mu      sync.Mutex // guards a and rec: one step at a time
	a       *renter.Array
	rec     ArrayRecord
	spec    *auction.JobSpec
	secrets map[string]string
	auth    *wire.RegistryAuth
	wake    chan struct{} // a shard's job changed state
}

// arrayPoll is how often a driver looks at its shards without being
// woken: a backstop, since every state change wakes it.
const arrayPoll = 2 * time.Second

// submitArray records an array and starts its driver; its first shards
// are submitted by the driver's first step.
func (r *Jobs) submitArray(spec *auction.JobSpec, specYAML []byte, secrets map[string]string, opt SubmitOptions) (*JobRecord, error) {
	if opt.Canary || opt.Service != "" {
		return nil, fmt.Errorf("%w: array: a canary or a service replica is one job", auction.ErrBadJobSpec)
	}
	// Dealt before the array is recorded: a split that cannot be made
	// refuses the submit, and nothing is bought.
	split, err := r.splitInput(spec)
	if err != nil {
		return nil, err
	}
	id := spec.Name + "-" + hex.EncodeToString(randomNonce()[:6])
	now := time.Now().UTC()
	a := renter.NewArray(id, spec.Array.Shards, spec.Array.MaxParallel)
	run := &arrayRun{a: a, spec: spec, secrets: secrets, auth: opt.RegistryAuth, wake: make(chan struct{}, 1),
		rec: ArrayRecord{ID: id, Name: spec.Name, Spec: string(specYAML), Created: now, Updated: now,
			Shards: spec.Array.Shards, MaxParallel: spec.Array.MaxParallel, Pin: opt.Provider,
			Secrets: len(secrets) > 0 || opt.RegistryAuth != nil, Life: a.Snapshot(), Split: split}}
	if err := r.saveArray(&run.rec); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.arrays[id] = run
	r.mu.Unlock()
	if !r.spawn(func() { r.drive(run) }) {
		return nil, errStopping
	}
	return r.Get(id)
}

func (r *Jobs) saveArray(a *ArrayRecord) error {
	return r.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketArrays, a.ID, a) })
}

// loadArrays reads the arrays of the last run; Resume drives those that
// had not ended.
func (r *Jobs) loadArrays() error {
	return r.store.ForEach(store.BucketArrays, func(key string, raw []byte) error {
		var rec ArrayRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		spec, err := auction.ParseJobSpec([]byte(rec.Spec))
		if err != nil {
			return fmt.Errorf("array %s: %w", rec.ID, err)
		}
		run := &arrayRun{a: renter.RestoreArray(rec.Life), rec: rec, spec: spec, wake: make(chan struct{}, 1)}
		r.arrays[rec.ID] = run
		return nil
	})
}

// resumeArrays drives again the arrays that had not ended. One submitted
// with secrets cannot place its shards: they were never stored.
func (r *Jobs) resumeArrays() {
	r.mu.Lock()
	var runs []*arrayRun
	for _, run := range r.arrays {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	for _, run := range runs {
		if st, _ := run.a.State(); st != renter.ArrayRunning {
			continue
		}
		if run.rec.Secrets {
			run.mu.Lock()
			acts := run.a.Cancel()
			run.mu.Unlock()
			r.arrayEnded(run, "this node restarted; the array's secrets were never stored: resubmit it", acts)
			continue
		}
		r.spawn(func() { r.drive(run) })
	}
}

// drive steps run's array until it ends or this node stops.
func (r *Jobs) drive(run *arrayRun) {
	t := time.NewTicker(arrayPoll)
	defer t.Stop()
	for {
		if done := r.stepArray(run); done {
			return
		}
		select {
		case <-r.bg.Done():
			return
		case <-run.wake:
		case <-t.C:
		}
	}
}

// stepArray feeds the array what its shards' jobs say and carries out
// what it decides; it reports whether the array has ended. It holds
// run.mu throughout, so that a cancel waits for the shards being
// submitted and then cancels them too, and the record saved is never
// older than one saved before it.
func (r *Jobs) stepArray(run *arrayRun) bool {
	run.mu.Lock()
	if st, _ := run.a.State(); st != renter.ArrayRunning {
		run.mu.Unlock()
		return true // ended by cancelArray, which recorded it
	}
	seen := r.shardsSeen(run.a.Snapshot())
	acts := run.a.Step(seen, r.providersFor(run.spec))
	if st, why := run.a.State(); st != renter.ArrayRunning {
		run.mu.Unlock()
		r.arrayEnded(run, why, acts)
		return true
	}
	// Saved before submitting: a restart then finds these jobs, or
	// submits them again under the same IDs.
	run.rec.Life, run.rec.Updated = run.a.Snapshot(), time.Now().UTC()
	if err := r.saveArray(&run.rec); err != nil {
		r.log.Error("array record not saved", "array", run.rec.ID, "err", err)
	}
	for _, act := range acts {
		if act.Kind == renter.ActSubmit {
			if err := r.submitShard(run, act); err != nil {
				r.log.Error("shard not submitted", "array", run.rec.ID, "shard", act.Shard, "err", err)
			}
		}
	}
	run.mu.Unlock()
	return false
}

// arrayEnded records the array's end, then cancels what it leaves in
// flight (outside run.mu: telling providers may take a while, and the
// array, ended, submits nothing more meanwhile).
func (r *Jobs) arrayEnded(run *arrayRun, why string, acts []renter.ArrayAction) {
	run.mu.Lock()
	now := time.Now().UTC()
	run.rec.Life, run.rec.Updated, run.rec.EndedAt = run.a.Snapshot(), now, &now
	if err := r.saveArray(&run.rec); err != nil {
		r.log.Error("array record not saved", "array", run.rec.ID, "err", err)
	}
	id := run.rec.ID
	st, _ := run.a.State()
	run.mu.Unlock()
	for _, act := range acts {
		if act.Kind == renter.ActCancel {
			ctx, cancel := context.WithTimeout(r.bg, 30*time.Second)
			if _, err := r.Cancel(ctx, act.Job); err != nil {
				r.log.Warn("shard job not cancelled", "job", act.Job, "err", err)
			}
			cancel()
		}
	}
	r.log.Info("array ended", "array", id, "state", st, "why", why)
	r.publish(JobEvent{JobID: id, Type: "state", State: st, Note: why, Time: now})
}

// shardsSeen is what the array's in-flight shards' jobs say.
func (r *Jobs) shardsSeen(snap renter.ArraySnapshot) map[int]renter.ShardSeen {
	seen := map[int]renter.ShardSeen{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, sh := range snap.Shards {
		if sh.Phase != renter.ShardInFlight {
			continue
		}
		j, ok := r.jobs[sh.Job]
		if !ok {
			seen[i] = renter.ShardSeen{Missing: true}
			continue
		}
		o := renter.ShardSeen{Provider: j.Provider, Ended: Terminal(j.State), Completed: j.State == StateCompleted}
		if o.Ended && !o.Completed {
			o.NoMatch = j.State == StateNoMatch
			o.Reason = shardReason(j)
		}
		seen[i] = o
	}
	return seen
}

// shardReason is why a shard's job failed, worded the same for every
// job of the array (no job IDs), so that two providers' failures for one
// reason compare equal.
func shardReason(j *JobRecord) string {
	switch {
	case j.State == StateNoMatch:
		return "no provider matched the spec"
	case j.State == StateCancelled:
		return "cancelled"
	case j.ExitCode != nil && *j.ExitCode != 0:
		return fmt.Sprintf("exited with code %d", *j.ExitCode)
	}
	return strings.ReplaceAll(j.Error, j.ID, "<job>")
}

// providersFor is how many providers in the book could run a shard of
// spec now, for spreading the shards (0 when this node has no market:
// unknown, and nothing is avoided for being busy).
func (r *Jobs) providersFor(spec *auction.JobSpec) int {
	if r.m == nil {
		return 0
	}
	ok, _ := auction.Feasible(spec, r.m.Book().Snapshot(), auction.Env{Now: time.Now(), RTT: r.rtt, Reputation: r.rep})
	return len(ok)
}

// submitShard records and starts the job act names: shard act.Shard of
// run's array, with the shard's spec.
func (r *Jobs) submitShard(run *arrayRun, act renter.ArrayAction) error {
	ss, err := run.shardSpec(act.Shard)
	if err != nil {
		return err
	}
	y, err := yaml.Marshal(ss)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	shard := act.Shard
	j := &JobRecord{ID: act.Job, Name: run.spec.Name, State: StateAuction, Spec: string(y), Created: now, Updated: now,
		GPUs: ss.Resources.GPUs, Pin: run.rec.Pin, Avoid: act.Avoid, Secrets: run.rec.Secrets,
		Array: run.rec.ID, Shard: &shard}
	// Saved before it is shared: once in r.jobs, others update it.
	if err := r.save(j); err != nil {
		return err
	}
	r.mu.Lock()
	r.jobs[j.ID] = j
	r.logs[j.ID] = &jobLog{}
	if run.auth != nil {
		r.registryAuth[j.ID] = run.auth
	}
	r.mu.Unlock()
	start := func() { r.run(j.ID, ss, y, run.secrets, nil) }
	if r.runShard != nil {
		start = func() { r.runShard(j.ID, ss, y, run.secrets) }
	}
	if !r.spawn(start) {
		return errStopping
	}
	return nil
}

// wakeArray tells job's array, if it has one, that the job changed.
func (r *Jobs) wakeArray(j *JobRecord) {
	if j.Array == "" {
		return
	}
	r.mu.Lock()
	run := r.arrays[j.Array]
	r.mu.Unlock()
	if run == nil {
		return
	}
	select {
	case run.wake <- struct{}{}:
	default:
	}
}

// cancelArray ends run's array and every shard in flight.
func (r *Jobs) cancelArray(run *arrayRun) (*JobRecord, error) {
	run.mu.Lock()
	acts := run.a.Cancel()
	st, _ := run.a.State()
	run.mu.Unlock()
	if acts == nil && st != renter.ArrayCancelled {
		return r.Get(run.rec.ID)
	}
	r.arrayEnded(run, "cancelled by the renter", acts)
	return r.Get(run.rec.ID)
}

func (r *Jobs) arrayOf(id string) *arrayRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.arrays[id]
}
