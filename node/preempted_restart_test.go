package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
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
	waitsOnItsOwnJobs(t)
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
	if j, err := rn.renterJobs.Get(victim.ID); err != nil || renting.Terminal(j.State) {
		t.Fatalf("after the restart the waiting job is %+v (%v), want it still going", j, err)
	}
	waitJob(t, rn, silver.ID, 90*time.Second, "the silver job completed", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	done := waitJob(t, rn, victim.ID, 90*time.Second, "the bronze job ended", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	if done.State != renting.StateCompleted || done.Provider != prov.Host().ID().String() || done.Attempts != 2 {
		t.Fatalf("the bronze job ended %s on %s after %d leases (%q); want completed on the provider that preempted it, after 2",
			done.State, done.Provider, done.Attempts, done.Error)
	}
	logs, _ := rn.renterJobs.LogsOf(victim.ID)
	if !strings.Contains(string(logs), "resuming from checkpoint") {
		t.Errorf("the run after the restart did not resume from the checkpoint:\n%s", logs)
	}
	waitFor(t, 10*time.Second, "the ended job's lifecycle and checkpoint forgotten", func() bool {
		j, _ := rn.renterJobs.Get(victim.ID)
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
	waitsOnItsOwnJobs(t)
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prov := startSeller(t, ctx, func(s *offers.Settings) { s.Policy.PreemptNotice = 2 })
	rn := renterOf(t, ctx, prov)
	victim := mustSubmit(t, rn, checkpointSpec("victim", "bronze", "20s", "20"))
	waitJob(t, rn, victim.ID, 30*time.Second, "the bronze job running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	rn = restartRenter(t, ctx, rn, prov)
	waitPastStep3(t, rn, victim.ID, "the bronze job re-attached past its third step")
	silver := mustSubmit(t, rn, checkpointSpec("silver", "silver", "4s", "2"))
	waitPreemptedWaiting(t, rn, victim.ID, "the re-attached bronze job preempted and waiting")
	waitJob(t, rn, silver.ID, 60*time.Second, "the silver job completed", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	done := waitJob(t, rn, victim.ID, 90*time.Second, "the bronze job ended", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	if done.State != renting.StateCompleted || done.Provider != prov.Host().ID().String() || done.Attempts != 2 {
		t.Fatalf("the bronze job ended %s on %s after %d leases (%q); want completed on the provider that preempted it, after 2",
			done.State, done.Provider, done.Attempts, done.Error)
	}
	if logs, _ := rn.renterJobs.LogsOf(victim.ID); !strings.Contains(string(logs), "resuming from checkpoint") {
		t.Errorf("the run after the preemption did not resume from the checkpoint:\n%s", logs)
	}
}

// A renter restarted while a job is still in its first auction (no
// provider sells yet, so it retries) auctions it again from the start
// after the restart, and the job runs once a provider comes. Before, it
// failed: "this node restarted during the auction; resubmit the job".
func TestARestartedRenterAuctionsAgainAJobInItsFirstAuction(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rn := renterOf(t, ctx)
	spec := []byte("name: early\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"1s\", \"-lines\", \"1\"]\n" +
		"resources: {gpus: 1}\ntier: silver\nmax_price: 3.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\n" +
		"retry: {max_reauctions: 30}\n")
	j := mustSubmit(t, rn, spec)
	waitJob(t, rn, j.ID, 20*time.Second, "the job retrying its first auction", func(j *renting.JobRecord) bool {
		return j.State == renting.StateAuction && time.Since(j.Created) > time.Second
	})
	prov := startSeller(t, ctx, nil)
	rn = restartRenter(t, ctx, rn, prov)
	done := waitJob(t, rn, j.ID, 2*time.Minute, "the job ended", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	if done.State != renting.StateCompleted || done.Provider != prov.Host().ID().String() {
		t.Fatalf("the job ended %s on %q (%q); want completed on the provider that came", done.State, done.Provider, done.Error)
	}
}

// mustSubmit submits spec to rn's renter.
func mustSubmit(t *testing.T, rn *Node, spec []byte) *renting.JobRecord {
	t.Helper()
	j, err := rn.renterJobs.Submit(spec, nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitPastStep3 waits for a checkpointSpec job running past its third
// step, so that its checkpoint holds progress.
func waitPastStep3(t *testing.T, rn *Node, id, what string) {
	t.Helper()
	waitJob(t, rn, id, 30*time.Second, what, func(j *renting.JobRecord) bool {
		logs, _ := rn.renterJobs.LogsOf(id)
		return j.State == renting.StateRunning && strings.Contains(string(logs), "step 3")
	})
}

// waitPreemptedWaiting waits for a job preempted and waiting in its
// re-auction (which a preemption spends none of).
func waitPreemptedWaiting(t *testing.T, rn *Node, id, what string) {
	t.Helper()
	waitJob(t, rn, id, 30*time.Second, what, func(j *renting.JobRecord) bool {
		return j.State == renting.StateAuction && strings.Contains(j.Error, "no re-auction spent")
	})
}
