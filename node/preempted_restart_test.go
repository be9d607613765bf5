package node

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// A renter restarted while its preempted job waits in its re-auction goes
// on with that re-auction: the job goes back to the provider that
// preempted it once the silver job there ends, resumes from the
// checkpoint it shipped back, and completes. Before, the record still
// held the ended lease, so the restarted node tried to re-attach to it,
// the provider no longer ran it, and the job failed ("resubmit the job").
func TestARestartedRenterResumesItsWaitingPreemptedJob(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prov := startSeller(t, ctx, func(s *offers.Settings) { s.Policy.PreemptNotice = 2 })
	rn := renterOf(t, ctx, prov)
	victim := mustSubmit(t, rn, checkpointSpec("victim", "bronze", "20s", "20"))
	waitPastStep3(t, rn, victim.ID, "the bronze job past its third step")
	silver := mustSubmit(t, rn, checkpointSpec("silver", "silver", "12s", "3"))
	waitPreemptedWaiting(t, rn, victim.ID, "the bronze job preempted and waiting")
	rn = restartRenter(t, ctx, rn, prov)
	if j, err := rn.renterJobs.get(victim.ID); err != nil || terminal(j.State) {
		t.Fatalf("after the restart the waiting job is %+v (%v), want it still going", j, err)
	}
	waitJob(t, rn, silver.ID, 90*time.Second, "the silver job completed", func(j *JobRecord) bool { return terminal(j.State) })
	done := waitJob(t, rn, victim.ID, 90*time.Second, "the bronze job ended", func(j *JobRecord) bool { return terminal(j.State) })
	if done.State != StateCompleted || done.Provider != prov.Host().ID().String() || done.Attempts != 2 {
		t.Fatalf("the bronze job ended %s on %s after %d leases (%q); want completed on the provider that preempted it, after 2",
			done.State, done.Provider, done.Attempts, done.Error)
	}
	logs, _ := rn.renterJobs.logsOf(victim.ID)
	if !strings.Contains(string(logs), "resuming from checkpoint") {
		t.Errorf("the run after the restart did not resume from the checkpoint:\n%s", logs)
	}
	waitFor(t, 10*time.Second, "the ended job's lifecycle and checkpoint forgotten", func() bool {
		j, _ := rn.renterJobs.get(victim.ID)
		var ckpt []byte
		return j.Life == nil && rn.store.Get(store.BucketCheckpoints, victim.ID, &ckpt) == store.ErrNotFound
	})
}

// checkpointSpec is a job of the demo workload that writes a checkpoint
// after each of its lines, and resumes from one.
func checkpointSpec(name, tier, sleep, lines string) []byte {
	return []byte("name: " + name + "\nimage: " + demoimage.Tag + "\n" +
		`command: ["-sleep", "` + sleep + `", "-lines", "` + lines + `", "-checkpoint", "/checkpoint"]` + "\n" +
		"checkpoint: {path: /checkpoint}\nresources: {gpus: 1}\ntier: " + tier + "\nmax_price: 3.00\n" +
		"duration: {expected: 1m, max: 5m}\nallow_simulated: true\n")
}

// A job re-attached after its renter restarted, and preempted after that,
// is auctioned again from its checkpoint as if the renter had never
// stopped: the record kept its lifecycle. Before, a re-attached job whose
// run ended without completing failed ("resubmit the job").
func TestARestartedRenterReauctionsAReattachedJobThatIsPreempted(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prov := startSeller(t, ctx, func(s *offers.Settings) { s.Policy.PreemptNotice = 2 })
	rn := renterOf(t, ctx, prov)
	victim := mustSubmit(t, rn, checkpointSpec("victim", "bronze", "20s", "20"))
	waitJob(t, rn, victim.ID, 30*time.Second, "the bronze job running", func(j *JobRecord) bool { return j.State == StateRunning })
	rn = restartRenter(t, ctx, rn, prov)
	waitPastStep3(t, rn, victim.ID, "the bronze job re-attached past its third step")
	silver := mustSubmit(t, rn, checkpointSpec("silver", "silver", "4s", "2"))
	waitPreemptedWaiting(t, rn, victim.ID, "the re-attached bronze job preempted and waiting")
	waitJob(t, rn, silver.ID, 60*time.Second, "the silver job completed", func(j *JobRecord) bool { return terminal(j.State) })
	done := waitJob(t, rn, victim.ID, 90*time.Second, "the bronze job ended", func(j *JobRecord) bool { return terminal(j.State) })
	if done.State != StateCompleted || done.Provider != prov.Host().ID().String() || done.Attempts != 2 {
		t.Fatalf("the bronze job ended %s on %s after %d leases (%q); want completed on the provider that preempted it, after 2",
			done.State, done.Provider, done.Attempts, done.Error)
	}
	if logs, _ := rn.renterJobs.logsOf(victim.ID); !strings.Contains(string(logs), "resuming from checkpoint") {
		t.Errorf("the run after the preemption did not resume from the checkpoint:\n%s", logs)
	}
}

// What a restarted node does with each job its store holds: a job waiting
// in a re-auction with its lifecycle goes on (unless it needs secrets),
// so does one in its first auction, one leased is followed again, a
// canary in its auction fails, and a service's replica is left to its
// keeper's old path.
func TestARestartSortsTheJobsItFinds(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	life := &renter.Snapshot{Leases: 1, Preemptions: 1, LastEnd: renter.EndPreempted, LastProvider: "p", LastResort: []string{"p"}}
	recs := []JobRecord{
		{ID: "waiting", State: StateAuction, Lease: []byte("old"), Life: life},
		{ID: "secret", State: StateAuction, Lease: []byte("old"), Life: life, Secrets: true},
		{ID: "replica", State: StateAuction, Lease: []byte("old"), Life: life, Service: "web"},
		{ID: "leased", State: StateRunning, Lease: []byte("now"), Life: life},
		{ID: "first", State: StateAuction},
		{ID: "first-secret", State: StateAuction, Secrets: true},
		{ID: "canary", State: StateAuction, Canary: true},
	}
	if err := st.Update(func(tx *store.Tx) error {
		for _, j := range recs {
			if err := tx.Put(store.BucketJobs, j.ID, j); err != nil {
				return err
			}
		}
		return tx.Put(store.BucketCheckpoints, "waiting", []byte("step-600"))
	}); err != nil {
		t.Fatal(err)
	}
	r, err := newRenterJobs(renterDeps{bg: context.Background(), store: st, log: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(slices.Values(r.waiting)), []string{"first", "waiting"}) || !slices.Equal(slices.Sorted(slices.Values(r.resuming)), []string{"leased", "replica"}) {
		t.Fatalf("waiting %v, resuming %v; want [first waiting], [leased replica]", r.waiting, r.resuming)
	}
	for id, want := range map[string]string{"secret": "secrets were never stored", "first-secret": "secrets were never stored", "canary": "during the auction"} {
		if j, _ := r.get(id); j.State != StateFailed || !strings.Contains(j.Error, want) {
			t.Errorf("%s: %s (%s), want failed saying %q", id, j.State, j.Error, want)
		}
	}
	j, _ := r.get("waiting")
	restored, err := r.restore(j, &auction.JobSpec{Image: "x"})
	if err != nil || string(restored.Checkpoint()) != "step-600" || !restored.LastResort()["p"] || restored.Exclude()["p"] || restored.Policy().Patience != renter.PreemptedPatience {
		t.Fatalf("restored %+v (%v), want the preempted lifecycle with its checkpoint", restored.Snapshot(), err)
	}
}

// A renter restarted while a job is still in its first auction (no
// provider sells yet, so it retries) auctions it again from the start
// after the restart, and the job runs once a provider comes. Before, it
// failed: "this node restarted during the auction; resubmit the job".
func TestARestartedRenterAuctionsAgainAJobInItsFirstAuction(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rn := renterOf(t, ctx)
	spec := []byte("name: early\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"1s\", \"-lines\", \"1\"]\n" +
		"resources: {gpus: 1}\ntier: silver\nmax_price: 3.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\n" +
		"retry: {max_reauctions: 30}\n")
	j := mustSubmit(t, rn, spec)
	waitJob(t, rn, j.ID, 20*time.Second, "the job retrying its first auction", func(j *JobRecord) bool {
		return j.State == StateAuction && time.Since(j.Created) > time.Second
	})
	prov := startSeller(t, ctx, nil)
	rn = restartRenter(t, ctx, rn, prov)
	done := waitJob(t, rn, j.ID, 2*time.Minute, "the job ended", func(j *JobRecord) bool { return terminal(j.State) })
	if done.State != StateCompleted || done.Provider != prov.Host().ID().String() {
		t.Fatalf("the job ended %s on %q (%q); want completed on the provider that came", done.State, done.Provider, done.Error)
	}
}

// mustSubmit submits spec to rn's renter.
func mustSubmit(t *testing.T, rn *Node, spec []byte) *JobRecord {
	t.Helper()
	j, err := rn.renterJobs.submit(spec, nil, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitPastStep3 waits for a checkpointSpec job running past its third
// step, so that its checkpoint holds progress.
func waitPastStep3(t *testing.T, rn *Node, id, what string) {
	t.Helper()
	waitJob(t, rn, id, 30*time.Second, what, func(j *JobRecord) bool {
		logs, _ := rn.renterJobs.logsOf(id)
		return j.State == StateRunning && strings.Contains(string(logs), "step 3")
	})
}

// waitPreemptedWaiting waits for a job preempted and waiting in its
// re-auction (which a preemption spends none of).
func waitPreemptedWaiting(t *testing.T, rn *Node, id, what string) {
	t.Helper()
	waitJob(t, rn, id, 30*time.Second, what, func(j *JobRecord) bool {
		return j.State == StateAuction && strings.Contains(j.Error, "no re-auction spent")
	})
}
