package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
)

// A provider that crashed while its job ran starts a new executor (a new
// process) and adopts the job's container: the same container runs on,
// its output flows from the adoption on, Wait gets the job's real exit
// code and its start is the container's, and Remove leaves nothing.
func TestDockerAdoptsARunningJobAfterARestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owner := testOwner(t, "a", "one")
	before := ownedDocker(t, owner)
	spec := testSpec(t, "count", "30", "200", "7") // 6 s, then exit 7
	spec.CheckpointPath = "/ckpt"                  // a holder and a volume to take over too
	j, err := before.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	leaveNothing(t, owner, spec.JobID)
	waitForLog(t, j, "tick 2")
	id := j.(*dockerJob).id
	started := time.Now()
	crash(before, j) // the container runs on

	after := ownedDocker(t, owner)
	// Another instance of the same identity (a copy of the repo) cannot
	// take it, nor can anyone adopt a job that has no container.
	if _, err := ownedDocker(t, Owner{Node: owner.Node, Instance: owner.Instance + "-copy"}).Adopt(ctx, spec.JobID); !errors.Is(err, ErrNoJob) {
		t.Fatalf("a copy's adoption: %v, want ErrNoJob", err)
	}
	if _, err := after.Adopt(ctx, spec.JobID+"-none"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("adopting a job without a container: %v, want ErrNoJob", err)
	}
	a, err := after.Adopt(ctx, spec.JobID)
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, a)
	if got := a.(*dockerJob).id; got != id {
		t.Fatalf("adopted container %s, want the running one %s", got, id)
	}
	if a.StartedAt().IsZero() || a.StartedAt().After(started) || a.Paused() {
		t.Fatalf("adopted job started at %v (paused %v), want the container's start before %v", a.StartedAt(), a.Paused(), started)
	}
	waitForLog(t, a, "tick 25")
	res, err := a.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || res.StartedAt.Sub(a.StartedAt()).Abs() > time.Second || res.FinishedAt.Before(started) {
		t.Fatalf("result %+v, want exit 7 from the container's start", res)
	}
	if res.StdoutSHA256 != "" {
		t.Errorf("an adopted job's output hash %q covers only part of its output, want none", res.StdoutSHA256)
	}
	if logs := string(a.Logs().Bytes()); strings.Contains(logs, "tick 1\n") || !strings.Contains(logs, "tick 30\n") {
		t.Errorf("adopted logs %q, want the output since the adoption up to the end", logs)
	}
	if rc, err := a.CopyCheckpoint(ctx); err != nil {
		t.Errorf("checkpoint of the adopted job: %v", err)
	} else {
		rc.Close()
	}
	if err := a.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(containersOf(t, after, spec.JobID)); n != 0 {
		t.Fatalf("%d containers (job, holder) left after Remove", n)
	}
	if _, err := after.cli.VolumeInspect(ctx, "gleaner-ckpt-"+spec.JobID); err == nil {
		t.Error("the checkpoint volume outlived Remove")
	}
}

// An adopted job is controlled as a started one: a paused container is
// adopted paused, resumes, and stops with its notice (SIGKILL for one that
// ignores SIGTERM).
func TestDockerAdoptedJobPausesResumesAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner := testOwner(t, "a", "one")
	before := ownedDocker(t, owner)
	spec := testSpec(t, "ignore")
	j, err := before.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	leaveNothing(t, owner, spec.JobID)
	waitForLog(t, j, "ready")
	if err := j.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	crash(before, j)

	after := ownedDocker(t, owner)
	a, err := after.Adopt(ctx, spec.JobID)
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, a)
	if !a.Paused() {
		t.Fatal("a paused container was adopted as running")
	}
	if err := a.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := a.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || !res.Killed || res.ExitCode != 137 {
		t.Fatalf("stopped adopted job: %+v, want stopped and killed (137)", res)
	}
}

// A container that exited while no provider followed it is not adopted:
// Adopt says how it ended, from the engine's record, and leaves it for
// Reconcile.
func TestDockerAdoptReportsAJobThatExitedMeanwhile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner := testOwner(t, "a", "one")
	before := ownedDocker(t, owner)
	spec := testSpec(t, "count", "5", "100", "3")
	j, err := before.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	leaveNothing(t, owner, spec.JobID)
	want, err := j.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	crash(before, j)

	after := ownedDocker(t, owner)
	_, err = after.Adopt(ctx, spec.JobID)
	var ex *ExitedError
	if !errors.As(err, &ex) {
		t.Fatalf("adopting an exited job: %v, want an ExitedError", err)
	}
	if ex.Result.ExitCode != 3 || !ex.Result.StartedAt.Equal(want.StartedAt) || !ex.Result.FinishedAt.Equal(want.FinishedAt) {
		t.Errorf("exited job's record %+v, want exit 3, %v..%v", ex.Result, want.StartedAt, want.FinishedAt)
	}
	if n := len(containersOf(t, after, spec.JobID)); n != 1 {
		t.Fatalf("%d containers after a refused adoption, want the exited one left", n)
	}
	removed, err := after.Reconcile(ctx, func(string) bool { return false })
	if err != nil || len(removed) != 1 || removed[0] != spec.JobID {
		t.Fatalf("reconcile removed %v (%v), want the exited job", removed, err)
	}
}

// The process executor never adopts: nothing proves a process it finds
// is the job's.
func TestProcessDoesNotAdopt(t *testing.T) {
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Adopt(context.Background(), "any"); !errors.Is(err, ErrNotAdoptable) {
		t.Fatalf("process adopt: %v, want ErrNotAdoptable", err)
	}
}

// crash ends what the process that started j had of it, as its death
// would: the attach stream, the wait, the client. The container is left.
func crash(d *Docker, j Job) {
	dj := j.(*dockerJob)
	dj.mu.Lock()
	if dj.attach != nil {
		dj.attach.Close()
	}
	dj.mu.Unlock()
	dj.cancel()
	d.Close()
}

// leaveNothing removes what is left of jobID when the test ends, however
// it ended (an adoption that failed leaves the container to no one).
func leaveNothing(t *testing.T, owner Owner, jobID string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, err := NewDocker(ctx)
		if err != nil {
			return
		}
		defer d.Close()
		d.SetOwner(owner)
		var removed []string
		_ = d.sweep(ctx, filters.NewArgs(filters.Arg("label", LabelJob+"="+jobID)),
			func(map[string]string, bool) bool { return false }, &removed)
	})
}
