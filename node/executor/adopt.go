package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
)

// Adopting: a provider that crashed (or was killed) while its jobs ran
// finds their containers still running when it starts again, and takes
// them over instead of removing them, so that a restart within the lease
// costs the renter nothing of its run.

// Errors of Adopt.
var (
	// ErrNotAdoptable: this executor cannot take over a job an earlier
	// process started (the process executor: its children cannot be
	// proven to be the job's).
	ErrNotAdoptable = errors.New("executor: jobs of an earlier process cannot be adopted")
	// ErrNoJob: the owner has no container for the job, or one that never
	// started.
	ErrNoJob = errors.New("executor: no running container of this job")
)

// ExitedError is Adopt's answer for a job whose container exited while
// nobody followed it (between the provider's crash and its start):
// Result is what the engine recorded of the run, its exit code, start and
// finish (no output, no hash). The container is left as it is, for the
// caller's Reconcile to remove.
type ExitedError struct {
	JobID  string
	Result Result
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("executor: job %s exited with code %d at %s, before it was adopted", e.JobID, e.Result.ExitCode,
		e.Result.FinishedAt.UTC().Format(time.RFC3339))
}

// Adopter is an executor that can take over the running jobs of an
// earlier process of its owner.
type Adopter interface {
	Adopt(ctx context.Context, jobID string) (Adopted, error)
}

// Adopted is a job taken over from an earlier process: a Job like one
// Start returned, whose output is followed from the adoption on (what it
// wrote before went with the earlier process; the engine keeps no copy),
// so its Result carries no output hash.
type Adopted interface {
	Job
	// StartedAt is when the job's container started, by the engine's
	// record: when its run, and its bill, began.
	StartedAt() time.Time
	// Paused reports that the container was frozen when it was adopted
	// (the earlier process paused it for want of a voucher).
	Paused() bool
}

var _ Adopter = (*Docker)(nil)

// Adopt takes over jobID's container, which an earlier process of this
// executor's owner started, if it still runs (or is paused): the returned
// job's Logs follow its output from now on, and Wait, Stop, Pause,
// Resume, CopyCheckpoint, CopyOutputs and Remove work as for a job Start
// returned. A container that exited meanwhile is an *ExitedError; none,
// one that never started, or one that is not the owner's (another
// instance's, see Owner) is ErrNoJob. Adopt never changes a container it
// refuses.
func (d *Docker) Adopt(ctx context.Context, jobID string) (Adopted, error) {
	if d.owner.Instance == "" {
		return nil, fmt.Errorf("%w: job %s (this executor has no owner to prove it ours)", ErrNoJob, jobID)
	}
	owned := filters.NewArgs(filters.Arg("label", LabelManaged+"=1"), filters.Arg("label", LabelJob+"="+jobID),
		filters.Arg("label", LabelInstance+"="+d.owner.Instance))
	list, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: owned})
	if err != nil {
		return nil, fmt.Errorf("executor: adopt job %s: list containers: %w", jobID, err)
	}
	var id string
	var rs jobResources
	for _, c := range list {
		switch c.Labels[LabelRole] {
		case roleHolder:
			rs.holder = c.ID
		case "":
			id = c.ID
		}
		// Any other helper (an input filler that a crash left) is not
		// the job, and is Reconcile's to remove.
	}
	if id == "" {
		return nil, fmt.Errorf("%w: job %s", ErrNoJob, jobID)
	}
	info, err := d.cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("%w: job %s", ErrNoJob, jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("executor: adopt job %s: inspect: %w", jobID, err)
	}
	st := info.State
	started, _ := time.Parse(time.RFC3339Nano, st.StartedAt)
	switch {
	case st.Running:
	case st.Status == "created" || started.IsZero():
		return nil, fmt.Errorf("%w: job %s: its container never started", ErrNoJob, jobID)
	default:
		return nil, &ExitedError{JobID: jobID, Result: exitedResult(st)}
	}
	if err := d.findResources(ctx, owned, &rs); err != nil {
		return nil, fmt.Errorf("executor: adopt job %s: %w", jobID, err)
	}
	spec := Spec{JobID: jobID, LeaseCID: info.Config.Labels[LabelLease], Image: info.Config.Image,
		CheckpointPath: envOf(info.Config.Env, EnvCheckpointPath), OutputPath: outputMount(info.Mounts, jobID)}
	j := newDockerJob(d, id, rs, spec, Result{})
	j.adopted, j.startedAt, j.paused = true, started, st.Paused
	// The engine refuses to attach to a frozen container: it is thawed for
	// the attach, and frozen again at once.
	if st.Paused {
		if err := untilPauseSettles(ctx, func(ctx context.Context) error { return d.cli.ContainerUnpause(ctx, id) }); err != nil {
			return nil, fmt.Errorf("executor: adopt job %s: unpause to attach: %w", jobID, err)
		}
	}
	// From now on: the engine sends what the job writes after the attach
	// (its log driver is "none", so nothing before it).
	hj, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err == nil && st.Paused {
		if perr := untilPauseSettles(ctx, func(ctx context.Context) error { return d.cli.ContainerPause(ctx, id) }); perr != nil {
			hj.Close()
			err = fmt.Errorf("pause again after the attach: %w", perr)
		}
	}
	if err != nil {
		// It exited between the inspect and the attach.
		if again, ierr := d.cli.ContainerInspect(ctx, id); ierr == nil && !again.State.Running {
			return nil, &ExitedError{JobID: jobID, Result: exitedResult(again.State)}
		}
		return nil, fmt.Errorf("executor: adopt job %s: attach: %w", jobID, err)
	}
	j.mu.Lock()
	j.attach = &hj
	j.mu.Unlock()
	go j.pump(hj.Reader)
	// watch waits for the exit, however soon (an exit right after the
	// attach is seen as any other) and reads the result from the engine.
	go j.watch()
	return j, nil
}

// exitedResult is the engine's record of a container that exited: its
// exit code, start and finish (no output hash).
func exitedResult(st *container.State) Result {
	r := Result{ExitCode: st.ExitCode, OOMKilled: st.OOMKilled}
	r.StartedAt, _ = time.Parse(time.RFC3339Nano, st.StartedAt)
	r.FinishedAt, _ = time.Parse(time.RFC3339Nano, st.FinishedAt)
	// Docker stamps StartedAt once the process is running, which for a
	// job that exits at once can be after FinishedAt; a job never ends
	// before it starts.
	if r.FinishedAt.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt
	}
	return r
}

// findResources fills in the job's volumes and network from their labels
// (the holder was found with the containers), so that Remove takes them:
// the quota volumes and the input volumes, which an adoption keeps as
// they are (never filled again).
func (d *Docker) findResources(ctx context.Context, owned filters.Args, rs *jobResources) error {
	vols, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: owned})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	for _, v := range vols.Volumes {
		rs.volumes = append(rs.volumes, v.Name)
	}
	nets, err := d.cli.NetworkList(ctx, network.ListOptions{Filters: owned})
	if err != nil {
		return fmt.Errorf("list networks: %w", err)
	}
	if len(nets) > 0 {
		rs.network = nets[0].ID
	}
	return nil
}

// outputMount is where the job's container mounts its output volume, or
// "" for a job without one: the path CopyOutputs reads.
func outputMount(mounts []container.MountPoint, jobID string) string {
	for _, m := range mounts {
		if m.Type == mount.TypeVolume && m.Name == outputVolume(jobID) {
			return m.Destination
		}
	}
	return ""
}

func envOf(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

func (j *dockerJob) StartedAt() time.Time { return j.startedAt }

func (j *dockerJob) Paused() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.paused
}
