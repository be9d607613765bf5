package executor

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
)

func TestDockerRunLogsAndRemove(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	spec := testSpec(t, "hello")
	j, err := d.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	res, err := j.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Pulled || res.StartedAt.IsZero() || res.FinishedAt.Before(res.StartedAt) {
		t.Fatalf("result %+v", res)
	}
	if got := string(j.Logs().Bytes()); got != "hello from gleaner\n" {
		t.Fatalf("logs %q", got)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256([]byte("hello from gleaner\n"))); res.StdoutSHA256 != want {
		t.Fatalf("stdout hash %q, want %q", res.StdoutSHA256, want)
	}
	if n := len(containersOf(t, d, spec.JobID)); n != 1 {
		t.Fatalf("%d containers before Remove, want 1", n)
	}
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(containersOf(t, d, spec.JobID)); n != 0 {
		t.Fatalf("%d containers left after Remove", n)
	}
}

func TestDockerIsolation(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	spec := testSpec(t, "isolation")
	spec.GPUUUIDs, spec.SimulatedGPUs = []string{"GPU-sim-0"}, true
	spec.Env = map[string]string{"PLAIN": "yes"}
	spec.Secrets = Secrets{"API_TOKEN": "s3cret"}
	j, err := d.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	info, err := d.cli.ContainerInspect(ctx, j.(*dockerJob).id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var r struct {
		UID, GID                                      int
		RootWriteErr, TmpWriteErr, CapEff, NoNewPrivs string
		Interfaces                                    []string
		Env                                           map[string]string
	}
	if err := json.Unmarshal(j.Logs().Bytes(), &r); err != nil {
		t.Fatalf("probe output %q: %v", j.Logs().Bytes(), err)
	}
	t.Logf("seen from inside: uid=%d capeff=%s nnp=%s ifaces=%v rootwrite=%q", r.UID, r.CapEff, r.NoNewPrivs, r.Interfaces, r.RootWriteErr)
	switch {
	case r.UID != 65534 || r.GID != 65534:
		t.Errorf("runs as %d:%d, want 65534:65534", r.UID, r.GID)
	case !strings.Contains(r.RootWriteErr, "read-only file system"):
		t.Errorf("writing to / gave %q, want read-only file system", r.RootWriteErr)
	case r.TmpWriteErr != "":
		t.Errorf("/tmp not writable: %s", r.TmpWriteErr)
	case r.CapEff != "0000000000000000":
		t.Errorf("CapEff %s, want none", r.CapEff)
	case r.NoNewPrivs != "1":
		t.Errorf("NoNewPrivs %s", r.NoNewPrivs)
	case len(r.Interfaces) != 1 || r.Interfaces[0] != "lo":
		t.Errorf("interfaces %v, want only lo", r.Interfaces)
	case r.Env[EnvSimulatedGPUs] != "1" || r.Env["API_TOKEN"] != "s3cret" || r.Env["PLAIN"] != "yes":
		t.Errorf("env %v", r.Env)
	}

	hc := info.HostConfig
	switch {
	case hc.Privileged:
		t.Error("privileged")
	case len(hc.CapDrop) != 1 || hc.CapDrop[0] != "ALL":
		t.Errorf("CapDrop %v", hc.CapDrop)
	case len(hc.SecurityOpt) != 1 || hc.SecurityOpt[0] != "no-new-privileges":
		t.Errorf("SecurityOpt %v", hc.SecurityOpt)
	case !hc.ReadonlyRootfs || hc.NetworkMode != "none":
		t.Errorf("ReadonlyRootfs %v NetworkMode %s", hc.ReadonlyRootfs, hc.NetworkMode)
	case hc.Memory != 64<<20 || hc.NanoCPUs != 5e8 || hc.PidsLimit == nil || *hc.PidsLimit != 64:
		t.Errorf("limits: memory %d nanocpus %d pids %v", hc.Memory, hc.NanoCPUs, hc.PidsLimit)
	case len(hc.DeviceRequests) != 0:
		t.Errorf("simulated GPUs got device requests %+v", hc.DeviceRequests)
	case info.Config.Labels[LabelLease] != spec.LeaseCID:
		t.Errorf("labels %v", info.Config.Labels)
	}
}

func TestDockerStopCheckpoints(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	spec := testSpec(t, "trap")
	spec.CheckpointPath = "/ckpt"
	j, err := d.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	waitForLog(t, j, "ready")
	t0 := time.Now()
	if err := j.Stop(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("trapping job stopped in %v", time.Since(t0))
	res, err := j.Wait(ctx)
	if err != nil || res.ExitCode != 0 || !res.Stopped || res.Killed {
		t.Fatalf("result %+v, %v; logs %q", res, err, j.Logs().Bytes())
	}
	rc, err := j.CopyCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if strings.TrimPrefix(hdr.Name, "./") == "state" {
			data, _ := io.ReadAll(tr)
			if string(data) != "step=42\n" {
				t.Fatalf("checkpoint %q", data)
			}
		}
	}
	if !slices.Contains(names, "./state") {
		t.Fatalf("no ./state in checkpoint tar: %v", names)
	}
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	vols, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelJob+"="+spec.JobID))})
	if err != nil || len(vols.Volumes) != 0 || len(containersOf(t, d, spec.JobID)) != 0 {
		t.Fatalf("left behind: volumes %v (%v)", vols.Volumes, err)
	}
}

func TestDockerReconcile(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	kept, orphan := testSpec(t, "ignore"), testSpec(t, "trap")
	orphan.CheckpointPath = "/ckpt"
	var jobs []Job
	for _, s := range []Spec{kept, orphan} {
		j, err := d.Start(ctx, s, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		cleanupJob(t, j)
		jobs = append(jobs, j)
	}
	// A restarted provider knows only its leases, not the Job values.
	removed, err := d.Reconcile(ctx, func(id string) bool { return id != orphan.JobID })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, orphan.JobID) || slices.Contains(removed, kept.JobID) {
		t.Fatalf("removed %v; kept %s, orphan %s", removed, kept.JobID, orphan.JobID)
	}
	if len(containersOf(t, d, orphan.JobID)) != 0 || len(containersOf(t, d, kept.JobID)) != 1 {
		t.Fatal("reconcile removed the wrong containers")
	}
	vols, _ := d.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelJob+"="+orphan.JobID))})
	if len(vols.Volumes) != 0 {
		t.Fatalf("orphan's checkpoint volume survived: %v", vols.Volumes[0].Name)
	}
	// The orphan's Job notices its container is gone instead of hanging.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := jobs[1].Wait(wctx); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("Wait hangs after the container was reconciled away")
	}
}

func TestDockerStopKillsAfterNotice(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	j, err := d.Start(ctx, testSpec(t, "ignore"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	waitForLog(t, j, "ready")
	const notice = 2 * time.Second
	t0 := time.Now()
	if err := j.Stop(ctx, notice); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	t.Logf("SIGTERM-ignoring job gone after %v (notice %v)", took, notice)
	if took < notice || took >= notice+5*time.Second {
		t.Fatalf("stop took %v with notice %v", took, notice)
	}
	res, err := j.Wait(ctx)
	if err != nil || !res.Killed || res.ExitCode != 137 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if _, err := j.CopyCheckpoint(ctx); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("CopyCheckpoint without a path: %v", err)
	}
}

// A job that writes 2 MB nobody reads is not held up, and the provider
// keeps only the ring's worth of it.
func TestDockerLogsBounded(t *testing.T) {
	d := needDocker(t)
	d.logSize = 64 << 10
	ctx := context.Background()
	j, err := d.Start(ctx, testSpec(t, "spam"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	stalled := j.Logs().Subscribe() // never read
	defer stalled.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if res, err := j.Wait(wctx); err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	tail := j.Logs().Bytes()
	if len(tail) != 64<<10 || !strings.HasSuffix(string(tail), "x\nend\n") || j.Logs().Written() != 20000*100+4 {
		t.Fatalf("kept %d bytes of %d, tail ends %q", len(tail), j.Logs().Written(), tail[len(tail)-8:])
	}
}

func TestDockerPauseResume(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	j, err := d.Start(ctx, testSpec(t, "trap"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	waitForLog(t, j, "ready")
	id := j.(*dockerJob).id
	if err := j.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	waitEngineState(t, d, id, "paused", func(st *container.State) bool { return st.Paused })
	if err := j.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitEngineState(t, d, id, "running, not paused", func(st *container.State) bool { return st.Running && !st.Paused })
	// Stopping a paused job thaws it first, so it still gets its notice.
	if err := j.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if res, _ := j.Wait(ctx); res.Killed || !strings.Contains(string(j.Logs().Bytes()), "checkpoint") {
		t.Fatalf("paused job did not act on SIGTERM: %+v %q", res, j.Logs().Bytes())
	}
}

// waitEngineState waits, up to pauseSettle, for the engine to report the
// container in the state want. dockerd sets the paused flag when a pause
// or unpause returns and again when containerd's event for it comes in,
// later, so for a moment after an unpause a late "paused" event can show
// the flag set (pause_settle.go).
func waitEngineState(t *testing.T, d *Docker, id, what string, want func(*container.State) bool) {
	t.Helper()
	deadline := time.Now().Add(pauseSettle)
	for {
		info, err := d.cli.ContainerInspect(context.Background(), id)
		if err == nil && info.State != nil && want(info.State) {
			return
		}
		if time.Now().After(deadline) {
			var st any = err
			if err == nil {
				st = info.State
			}
			t.Fatalf("container not %s after %v: %+v", what, pauseSettle, st)
		}
		time.Sleep(pauseSettleStep)
	}
}
