package testnet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
)

const resumableSpec = `name: resumable
image: gleaner-demojob:1
command: ["-sleep", "8s", "-lines", "8", "-checkpoint", "/ckpt"]
resources: {gpus: 1}
tier: bronze
max_price: 1.00
duration: {expected: 1m, max: 10m}
checkpoint: {path: /ckpt}
retry: {max_reauctions: 2}
allow_simulated: true
`

// twoProviders starts five nodes of which 0 (cheaper) and 1 sell one
// simulated GPU each, bronze only.
func twoProviders(t *testing.T, ctx context.Context) *Cluster {
	t.Helper()
	return marketCluster(t, ctx, 5, price{bronze: "0.30"}, price{bronze: "0.50"})
}

func waitLog(t *testing.T, c *Cluster, renter int, id, want string) {
	t.Helper()
	cl, _ := c.Client(renter)
	deadline := time.Now().Add(time.Minute)
	for {
		var logs node.JobLogsResult
		if err := cl.Call(context.Background(), "job_logs", node.JobIDParams{ID: id}, &logs); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs.Logs, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never printed %q; logs:\n%s", id, want, logs.Logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPreemptedBronzeJobResumesElsewhereFromItsCheckpoint: the owner of the
// winning provider starts their own work on the leased GPU; the bronze job
// gets SIGTERM, checkpoints, its checkpoint travels back to the renter, and
// the re-auctioned job resumes from it on the other provider.
func TestPreemptedBronzeJobResumesElsewhereFromItsCheckpoint(t *testing.T) {
	waitsApart(t)
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := twoProviders(t, ctx)
	renter, _ := c.Client(4)
	j := submitJob(t, renter, resumableSpec)
	waitLog(t, c, 4, j.ID, "step 2/8 done")
	first := c.Nodes()[0].Host().ID().String()
	if got, _ := jobOf(t, renter, j.ID); got.Provider != first {
		t.Fatalf("the cheaper provider did not win: %s", got.Provider)
	}
	sim := c.Nodes()[0].GPUSource().(*attest.Simulated)
	if err := sim.SetLoad(0, 60, 200, []attest.Process{{PID: 31337, UsedMiB: 4096, Name: "owner-game"}}); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, renter, j.ID, func(s string) bool {
		return s == renting.StateCompleted || s == renting.StateFailed || s == renting.StateNoMatch
	}, 2*time.Minute)
	if j.State != renting.StateCompleted || j.Provider == first || j.Attempts != 2 {
		t.Fatalf("after preemption: %+v", j)
	}
	waitLog(t, c, 4, j.ID, "SIGTERM: checkpointed after step")
	waitLog(t, c, 4, j.ID, "resuming from checkpoint")
	noContainersLeft(t, j.ID)
}

// TestJobSurvivesItsProviderDying: the provider running a job drops off
// the network mid-job; the renter notices, re-auctions, and the job
// completes on the other provider; stopping the dead provider leaves no
// container behind.
func TestJobSurvivesItsProviderDying(t *testing.T) {
	waitsApart(t)
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := twoProviders(t, ctx)
	renter, _ := c.Client(4)
	j := submitJob(t, renter, resumableSpec)
	waitLog(t, c, 4, j.ID, "step 1/8 done")
	dead := c.Nodes()[0]
	if err := dead.Host().Close(); err != nil { // the network goes; the process lingers
		t.Fatal(err)
	}
	lostAt := time.Now()
	j = waitJob(t, renter, j.ID, func(s string) bool {
		return s == renting.StateCompleted || s == renting.StateFailed || s == renting.StateNoMatch
	}, 2*time.Minute)
	if j.State != renting.StateCompleted || j.Provider == dead.Host().ID().String() {
		t.Fatalf("after the provider died: %+v", j)
	}
	t.Logf("completed elsewhere %v after the provider vanished", time.Since(lostAt))
	// The second run lasted about 8 s: at least one signed sample per
	// heartbeat, all verified, and marked simulated.
	if tm := j.Telemetry; tm == nil || tm.Samples < 1 || tm.Rejected != 0 || !tm.Simulated {
		t.Fatalf("telemetry of the completed run: %+v", tm)
	}
	stopCtx, stopCancel := context.WithTimeout(ctx, 30*time.Second)
	defer stopCancel()
	_ = dead.Stop(stopCtx)
	deadline := time.Now().Add(30 * time.Second)
	for managedContainers(t, j.ID) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("containers left behind:\n%s", managedContainers(t, j.ID))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func jobOf(t *testing.T, cl interface {
	Call(context.Context, string, any, any) error
}, id string) (renting.JobRecord, error) {
	var j renting.JobRecord
	err := cl.Call(context.Background(), "job_status", node.JobIDParams{ID: id}, &j)
	return j, err
}

// TestSilverAwardPreemptsBronze: a provider whose only GPU runs a bronze
// job accepts a silver job; the bronze job is preempted with notice and
// checkpoints, the silver job runs to completion on the handed-over GPU.
func TestSilverAwardPreemptsBronze(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := marketCluster(t, ctx, 4, price{"0.30", "0.60"})
	prov := c.Nodes()[0].Host().ID().String()

	bronzeRenter, _ := c.Client(2)
	bronze := submitJob(t, bronzeRenter, resumableSpec)
	waitLog(t, c, 2, bronze.ID, "step 1/8 done")

	silverRenter, _ := c.Client(3)
	j := submitJob(t, silverRenter, jobSpec("urgent", "silver", "-sleep", "500ms"))
	j = waitJob(t, silverRenter, j.ID, func(s string) bool {
		return s == renting.StateCompleted || s == renting.StateFailed || s == renting.StateNoMatch
	}, time.Minute)
	if j.State != renting.StateCompleted || j.Provider != prov {
		var ex renter.Explain
		_ = silverRenter.Call(ctx, "job_explain", node.JobIDParams{ID: j.ID}, &ex)
		t.Fatalf("silver job: %+v\nexplain %+v", j, ex)
	}
	waitLog(t, c, 2, bronze.ID, "SIGTERM: checkpointed after step")
}

// TestRenterRestartFollowsItsJobAgain: the renter's node restarts while its
// job runs; the provider keeps running it, and the restarted node attaches
// to it again and sees it complete.
func TestRenterRestartFollowsItsJobAgain(t *testing.T) {
	waitsApart(t)
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := twoProviders(t, ctx)
	renter, _ := c.Client(4)
	j := submitJob(t, renter, resumableSpec)
	waitLog(t, c, 4, j.ID, "step 1/8 done")
	if _, err := c.Restart(ctx, 4); err != nil {
		t.Fatal(err)
	}
	renter, _ = c.Client(4)
	done := waitJob(t, renter, j.ID, func(s string) bool { return s == renting.StateCompleted || s == renting.StateFailed }, 2*time.Minute)
	if done.State != renting.StateCompleted || done.Provider != j.Provider && j.Provider != "" || done.Attempts != 1 {
		t.Fatalf("after the renter restarted: %+v", done)
	}
	waitLog(t, c, 4, j.ID, "job finished")
}
