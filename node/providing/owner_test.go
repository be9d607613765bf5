package providing

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
)

// A lease's state has one owner, the scheduler. The adapter keeps only a
// lease's handles, and its records are written from the scheduler's
// state. These tests check that the three views (the scheduler's, the
// adapter's handles, the records) say the same, after every step of
// random award, start, supersede, cancel, exit and wait sequences, and
// after a restart from the records they leave.

// checkOneOwner fails the test unless, with the provider at rest, the
// adapter holds handles for exactly the leases the scheduler holds, each
// the same lease, and each lease's record is the one the scheduler's
// state calls for: awarded while Awarded; started while Started and its
// job has no container yet; launched once a container is being started or
// runs. A lease the scheduler no longer holds has no handles and a record
// of an end.
func checkOneOwner(t *testing.T, pj *Provider, step string) {
	t.Helper()
	infos := pj.sched.Leases(time.Now())
	pj.mu.Lock()
	handles := maps.Clone(pj.leases)
	container := map[string]bool{}
	for id, al := range handles {
		container[id] = al.job != nil || al.starting != nil
	}
	pj.mu.Unlock()
	held := map[string]bool{}
	for _, in := range infos {
		id := in.Lease.JobID
		held[id] = true
		al, ok := handles[id]
		switch {
		case !ok:
			t.Errorf("%s: the scheduler holds %s and the adapter has no handles for it", step, id)
			continue
		case !in.IsLease(al.lease):
			t.Errorf("%s: the adapter's handles of %s are another lease's than the scheduler holds", step, id)
		case !pj.Holds(id):
			t.Errorf("%s: Holds(%s) is false while the scheduler holds it", step, id)
		}
		want := LeaseAwarded
		if in.State == sched.Started {
			want = LeaseStarted
			if container[id] {
				want = LeaseLaunched
			}
		}
		if got, _ := pj.LeaseState(id); got != want {
			t.Errorf("%s: %s is %s (launched: %v, running: %v, ending: %v) in the scheduler and %q on disk, want %q",
				step, id, in.State, in.Launched, in.Running, in.Ending, got, want)
		}
	}
	for id := range handles {
		if !held[id] {
			t.Errorf("%s: the adapter keeps handles of %s, which the scheduler does not hold", step, id)
		}
	}
	_ = pj.store.ForEach(func(id string, raw []byte) error {
		rec, err := ReadRecord(raw)
		if err != nil {
			t.Errorf("%s: the record of %s is unreadable: %v", step, id, err)
			return nil
		}
		if !held[id] && rec.State != LeaseEnded && rec.State != LeaseExpired && rec.State != LeaseInterrupted {
			t.Errorf("%s: %s is recorded %q and the scheduler does not hold it", step, id, rec.State)
		}
		return nil
	})
}

// tryLease is renter.lease that reports a refusal instead of failing the
// test: a full provider declines, a raced award is refused.
func (rt *renter) tryLease(job string, specYAML []byte) ([]byte, error) {
	rep := rt.r.pj.quote(wire.QuoteRequest{JobID: job, Nonce: []byte("the renter nonce"), Spec: specYAML}, rt.id)
	if rep.Decline != "" {
		return nil, fmt.Errorf("declined: %s", rep.Decline)
	}
	b, _, err := auction.DecodeSignedBid(rep.Bid, time.Now())
	if err != nil {
		return nil, err
	}
	l := &auction.Lease{JobID: job, Network: testNet, Renter: rt.id, Provider: b.Provider,
		Tier: b.Tier, Price: b.Price, GPUs: b.GPUs, Start: b.Start, End: b.Start + b.DurationSec,
		NoticeSec: b.NoticeSec, BillingSec: 300, Bid: rep.Bid, GPUUUIDHash: b.GPUHashes, SpecHash: b.SpecHash}
	sl, err := auction.ProposeLease(l, rt.key)
	if err != nil {
		return nil, err
	}
	prop, err := sl.Marshal()
	if err != nil {
		return nil, err
	}
	return rt.r.pj.accept(prop, rt.id)
}

// leaseWalk drives one provider through random steps, as renters and the
// clock would.
type leaseWalk struct {
	t       *testing.T
	r       *rig
	rnd     *rand.Rand
	n       int
	renters map[string]*renter  // by job ID
	specs   map[string][]byte   // by job ID
	raws    map[string][]byte   // the job's latest lease
	old     map[string][]byte   // a lease of the job that a later award superseded
	started map[string]bool     // a start of the job's latest lease was sent
	jobs    map[string]*fakeJob // the containers started, by executor job ID
	follows []*follower
}

func (w *leaseWalk) pick(from map[string][]byte, ok func(job string) bool) (string, bool) {
	var ids []string
	for id := range from {
		if ok(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "", false
	}
	slices.Sort(ids)
	return ids[w.rnd.IntN(len(ids))], true
}

// step takes one random step and names it.
func (w *leaseWalk) step() string {
	switch w.rnd.IntN(9) {
	case 0, 1:
		job := fmt.Sprintf("job-%d", w.n)
		w.n++
		rt, sp := w.r.renter(), spec(job, auction.Bronze)
		switch w.rnd.IntN(3) {
		case 0:
			sp = spec(job, auction.Silver)
		case 1:
			// A reservation: started, it waits for its window with no
			// container.
			at := time.Now().Add(time.Duration(1+w.rnd.IntN(3)) * time.Minute).UTC().Truncate(time.Second)
			sp = append(spec(job, auction.Gold), "start: "+at.Format(time.RFC3339)+"\n"...)
		}
		raw, err := rt.tryLease(job, sp)
		if err != nil {
			return "award of " + job + " refused"
		}
		w.renters[job], w.specs[job], w.raws[job] = rt, sp, raw
		return "award of " + job
	case 2, 3:
		job, ok := w.pick(w.raws, func(id string) bool { return !w.started[id] })
		if !ok {
			return "no start"
		}
		w.started[job] = true
		w.follows = append(w.follows, w.renters[job].start(w.raws[job], w.specs[job]))
		return "start of " + job
	case 4:
		job, ok := w.pick(w.raws, func(id string) bool { return !w.started[id] })
		if !ok {
			return "no supersede"
		}
		raw, err := w.renters[job].tryLease(job, w.specs[job])
		switch {
		case err != nil:
			return "new award of " + job + " refused"
		case bytes.Equal(raw, w.raws[job]):
			// The same quote at the same instant: the same award again,
			// which gets the same lease.
			return "the same award of " + job + " again"
		}
		w.old[job], w.raws[job] = w.raws[job], raw
		return "new award of " + job
	case 5:
		job, ok := w.pick(w.old, func(string) bool { return true })
		if !ok {
			return "no start of a superseded award"
		}
		f := w.renters[job].start(w.old[job], w.specs[job])
		defer f.close()
		if ev := f.until(w.t, "the refusal", func(wire.Event) bool { return true }); ev.Type != wire.EventError {
			w.t.Errorf("the start of %s's superseded award was not refused: %+v", job, ev)
		}
		return "start of " + job + "'s superseded award"
	case 6:
		job, ok := w.pick(w.raws, func(id string) bool { return w.started[id] })
		if !ok || w.rnd.IntN(2) == 0 {
			return "no cancel"
		}
		f := w.renters[job].request(wire.JobRequest{Kind: "cancel", Lease: w.raws[job]})
		defer f.close()
		f.end()
		return "cancel of " + job
	case 7:
		var live []*fakeJob
		for _, id := range slices.Sorted(maps.Keys(w.jobs)) {
			if j := w.jobs[id]; !j.exitedYet() {
				live = append(live, j)
			}
		}
		if len(live) == 0 {
			return "no exit"
		}
		j := live[w.rnd.IntN(len(live))]
		j.exit(0, false)
		return "exit of " + j.ID()
	default:
		d := time.Duration(1+w.rnd.IntN(20)) * time.Second
		time.Sleep(d)
		return "wait " + d.String()
	}
}

// settle waits until the provider is at rest, taking every container the
// executor started.
func (w *leaseWalk) settle() {
	for {
		synctest.Wait()
		select {
		case j := <-w.r.exec.started:
			w.jobs[j.ID()] = j
		default:
			return
		}
	}
}

func (j *fakeJob) exitedYet() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.exited
}

// After every step of random sequences of awards, starts, supersedes,
// starts of superseded awards, exits and waits (expiries, preemptions by
// silver awards), the scheduler, the adapter's handles and the records
// agree; and a provider that crashed then and starts again over its
// records holds, in its scheduler, exactly what they say.
func TestLeaseStateHasOneOwner(t *testing.T) {
	for run := range 12 {
		seed := rand.Uint64()
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				walkAndRestart(t, seed, 2+run%2)
			})
		})
	}
}

func walkAndRestart(t *testing.T, seed uint64, gpus int) {
	r := newRig(t, gpus)
	defer r.stop()
	go r.pj.Run(r.pj.bg)
	w := &leaseWalk{t: t, r: r, rnd: rand.New(rand.NewPCG(seed, seed)), renters: map[string]*renter{}, specs: map[string][]byte{},
		raws: map[string][]byte{}, old: map[string][]byte{}, started: map[string]bool{}, jobs: map[string]*fakeJob{}}
	defer func() {
		for _, f := range w.follows {
			f.close()
		}
	}()
	for i := range 40 {
		what := w.step()
		w.settle()
		checkOneOwner(t, r.pj, fmt.Sprintf("step %d (%s)", i, what))
		if t.Failed() {
			return
		}
	}

	// A crash: the containers run on, the records stay as they are.
	for id, j := range w.jobs {
		if !j.exitedYet() {
			r.exec.orphans[id] = j
		}
	}
	r.pj.SimulateCrash()
	r.stop()
	w.settle()
	recs := map[string]RecordState{}
	_ = r.store.ForEach(func(id string, raw []byte) error {
		rec, _ := ReadRecord(raw)
		recs[id] = rec.State
		return nil
	})

	again := newRigOver(t, gpus, r.key, r.store, r.exec)
	defer again.stop()
	restored, err := again.pj.Restore(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for id, st := range recs {
		info, held := again.pj.sched.Lease(id, time.Now())
		switch {
		case st == LeaseLaunched && held && (info.State != sched.Started || !info.Running || !slices.Contains(restored.Adopted, id)):
			t.Errorf("%s was recorded launched and is held %s (running: %v), restored %+v", id, info.State, info.Running, restored)
		case (st == LeaseAwarded || st == LeaseStarted) && held && (info.State != sched.Awarded || !slices.Contains(restored.Kept, id)):
			t.Errorf("%s was recorded %s and is held %s, restored %+v", id, st, info.State, restored)
		case st == LeaseLaunched || st == LeaseAwarded || st == LeaseStarted:
			if !held && !slices.Contains(restored.Ended, id) {
				t.Errorf("%s was recorded %s and is neither held nor ended: restored %+v", id, st, restored)
			}
		case held:
			t.Errorf("%s was recorded %s and is held again", id, st)
		}
	}
	synctest.Wait()
	checkOneOwner(t, again.pj, "after the restart")
}

// A restart across versions: the records an older version wrote (the
// state a plain string, or, older still, the bare lease bytes) are read
// as they were, and their leases held again: an awarded one kept, a
// launched one adopted, a bare one ended. What this version writes back
// reads in the older form.
func TestRecordsOfAnOlderVersionAreRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newRig(t, 3)
		rt := first.renter()
		kept := rt.lease("kept", spec("kept", auction.Silver))
		ran := rt.lease("ran", spec("ran", auction.Silver))
		bare := rt.lease("bare", spec("bare", auction.Silver))
		first.stop()

		// Written as an older version wrote them, byte for byte.
		b64 := base64.StdEncoding.EncodeToString
		old := map[string]string{
			"kept": `{"lease":"` + b64(kept) + `","state":"awarded","updated":"2026-11-30T10:00:00Z"}`,
			"ran":  `{"lease":"` + b64(ran) + `","state":"launched","updated":"2026-11-30T10:00:05Z"}`,
			"bare": `"` + b64(bare) + `"`,
		}
		want := map[string]RecordState{"kept": LeaseAwarded, "ran": LeaseLaunched, "bare": LeaseEnded}
		first.store.mu.Lock()
		for id, raw := range old {
			first.store.recs[id] = []byte(raw)
		}
		first.store.mu.Unlock()
		for id, raw := range old {
			rec, err := ReadRecord([]byte(raw))
			if err != nil || rec.State != want[id] || len(rec.Lease) == 0 {
				t.Fatalf("the older record of %s reads as %q (%d lease bytes), %v; want %q", id, rec.State, len(rec.Lease), err, want[id])
			}
		}
		j := newFakeJob(executor.Spec{JobID: first.pj.execID("ran"), Image: "example.org/job:1"}, time.Now())
		first.exec.orphans[j.ID()] = j

		again := newRigOver(t, 3, first.key, first.store, first.exec)
		defer again.stop()
		restored, err := again.pj.Restore(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(restored.Kept, []string{"kept"}) || !slices.Equal(restored.Adopted, []string{"ran"}) || len(restored.Ended) != 0 {
			t.Fatalf("restored %+v: want kept held again and ran adopted", restored)
		}
		if in, ok := again.pj.sched.Lease("kept", time.Now()); !ok || in.State != sched.Awarded {
			t.Fatalf("kept is %s (held: %v) in the scheduler, want awarded", in.State, ok)
		}
		if in, ok := again.pj.sched.Lease("ran", time.Now()); !ok || in.State != sched.Started || !in.Running {
			t.Fatalf("ran is %s (held: %v, running: %v) in the scheduler, want started and running", in.State, ok, in.Running)
		}
		if again.pj.Holds("bare") {
			t.Fatal("a bare record, ended, was held again")
		}
		checkOneOwner(t, again.pj, "after the restart across versions")

		// An older version reads what this one wrote back.
		var older struct {
			Lease []byte `json:"lease"`
			State string `json:"state"`
		}
		first.store.mu.Lock()
		raw := first.store.recs["kept"]
		first.store.mu.Unlock()
		if err := json.Unmarshal(raw, &older); err != nil || older.State != "awarded" || len(older.Lease) == 0 {
			t.Fatalf("the record written back %s reads in the older form as %+v, %v", raw, older, err)
		}
		j.exit(0, false)
	})
}

// failingStore is a Store whose writes fail: a full or broken disk.
type failingStore struct{ Store }

func (failingStore) Update(func(Tx) error) error { return errors.New("disk full") }

// A supersede whose record cannot be written is called off: the renter's
// new award is refused, as when the provider held a lock around the
// write, and the award it would have replaced is an award again, held and
// startable, not left marked in the scheduler.
func TestASupersedeThatCannotBeRecordedIsCalledOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		rt := r.renter()
		sp := spec("again", auction.Silver)
		raw := rt.lease("job-1", sp)
		time.Sleep(time.Second) // another quote, so another award
		r.pj.store = failingStore{r.store}
		if _, err := rt.tryLease("job-1", sp); err == nil {
			t.Fatal("a new award whose supersede could not be recorded was accepted")
		}
		r.pj.store = r.store
		if in, ok := r.pj.sched.Lease("job-1", time.Now()); !ok || in.State != sched.Awarded || in.Superseding {
			t.Fatalf("the first award is %s (held %v, superseding %v), want awarded and startable", in.State, ok, in.Superseding)
		}
		checkOneOwner(t, r.pj, "after the failed supersede")
		f := rt.start(raw, sp)
		defer f.close()
		job := <-r.exec.started
		f.until(t, "running", isStatus(wire.StatusRunning))
		job.exit(0, false)
		f.until(t, "the exit", isType(wire.EventExit))
	})
}
