package executor

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// dockerJob is one container. Two goroutines serve it: pump copies the
// attach stream into the log ring, watch waits for the exit and records the
// result. Both live until the container exits or Remove.
type dockerJob struct {
	d      *Docker
	id     string       // container ID
	rs     jobResources // its network, volumes and their holder
	spec   Spec
	logs   *LogBuffer
	out    *outputHash   // of stdout, as it streams
	done   chan struct{} // closed once res and waitErr are final
	pumped chan struct{} // closed once the attach stream ended
	bg     context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards everything below
	res     Result
	waitErr error
	paused  bool
	attach  *types.HijackedResponse
	removed bool

	// adopted: taken over from an earlier process (Docker.Adopt), whose
	// output before the adoption is not ours to hash; startedAt is when
	// its container started.
	adopted   bool
	startedAt time.Time
}

func newDockerJob(d *Docker, id string, rs jobResources, spec Spec, res Result) *dockerJob {
	bg, cancel := context.WithCancel(context.Background())
	return &dockerJob{
		d: d, id: id, rs: rs, spec: spec, res: res,
		logs:   NewLogBuffer(d.logSize),
		out:    newOutputHash(),
		done:   make(chan struct{}),
		pumped: make(chan struct{}),
		bg:     bg, cancel: cancel,
	}
}

// start attaches before starting, so that not a byte of output is missed.
func (j *dockerJob) start(ctx context.Context) error {
	cli := j.d.cli
	hj, err := cli.ContainerAttach(ctx, j.id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	j.mu.Lock()
	j.attach = &hj
	j.mu.Unlock()
	go j.pump(hj.Reader)
	if err := cli.ContainerStart(ctx, j.id, container.StartOptions{}); err != nil {
		return err
	}
	go j.watch()
	return nil
}

// pump never blocks on readers (LogBuffer.Write does not), so the daemon,
// and through it the job, is never held up by a slow log subscriber.
func (j *dockerJob) pump(r io.Reader) {
	defer close(j.pumped)
	_, _ = stdcopy.StdCopy(j.out.tee(j.logs), j.logs, r)
	_ = j.logs.Close()
}

func (j *dockerJob) watch() {
	defer close(j.done)
	cli := j.d.cli
	var waitErr error
	waitC, errC := cli.ContainerWait(j.bg, j.id, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case waitErr = <-errC:
	}
	// The attach stream ends right after the exit; wait for it so that
	// Wait's caller sees the whole output, but not forever.
	complete := false
	select {
	case <-j.pumped:
		complete = true
	case <-time.After(5 * time.Second):
	}
	info, err := cli.ContainerInspect(j.bg, j.id)
	j.mu.Lock()
	defer j.mu.Unlock()
	if complete && !j.adopted {
		j.res.StdoutSHA256 = j.out.Sum()
	}
	switch {
	case waitErr != nil:
		j.waitErr = fmt.Errorf("executor: wait for job %s: %w", j.spec.JobID, waitErr)
	case err != nil:
		j.waitErr = fmt.Errorf("executor: inspect job %s: %w", j.spec.JobID, err)
	default:
		r := exitedResult(info.State)
		j.res.ExitCode, j.res.OOMKilled, j.res.StartedAt, j.res.FinishedAt = r.ExitCode, r.OOMKilled, r.StartedAt, r.FinishedAt
	}
}

func (j *dockerJob) ID() string       { return j.spec.JobID }
func (j *dockerJob) Logs() *LogBuffer { return j.logs }

func (j *dockerJob) Wait(ctx context.Context) (Result, error) {
	select {
	case <-j.done:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.res, j.waitErr
}

func (j *dockerJob) exited() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// Stop signals by hand rather than through ContainerStop, whose timeout
// is whole seconds and which does not tell whether SIGKILL was needed.
func (j *dockerJob) Stop(ctx context.Context, notice time.Duration) error {
	if j.exited() {
		return nil
	}
	j.mu.Lock()
	j.res.Stopped = true
	paused := j.paused
	j.mu.Unlock()
	if paused { // a frozen job cannot act on SIGTERM
		if err := j.Resume(ctx); err != nil && !j.exited() {
			return err
		}
	}
	return stopWithNotice(ctx, notice, j.done,
		func() error { return j.kill(ctx, "SIGTERM") },
		func() error { return j.kill(ctx, "SIGKILL") },
		func() { j.mu.Lock(); j.res.Killed = true; j.mu.Unlock() })
}

// kill tolerates the job having exited meanwhile.
func (j *dockerJob) kill(ctx context.Context, sig string) error {
	err := j.d.cli.ContainerKill(ctx, j.id, sig)
	if err == nil || cerrdefs.IsConflict(err) || cerrdefs.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("executor: %s job %s: %w", sig, j.spec.JobID, err)
}

func (j *dockerJob) Pause(ctx context.Context) error {
	if err := untilPauseSettles(ctx, func(ctx context.Context) error { return j.d.cli.ContainerPause(ctx, j.id) }); err != nil {
		return fmt.Errorf("executor: pause job %s: %w", j.spec.JobID, err)
	}
	j.mu.Lock()
	j.paused = true
	j.mu.Unlock()
	return nil
}

func (j *dockerJob) Resume(ctx context.Context) error {
	if err := untilPauseSettles(ctx, func(ctx context.Context) error { return j.d.cli.ContainerUnpause(ctx, j.id) }); err != nil {
		return fmt.Errorf("executor: resume job %s: %w", j.spec.JobID, err)
	}
	j.mu.Lock()
	j.paused = false
	j.mu.Unlock()
	return nil
}

// CopyCheckpoint asks for "<path>/." so that the tar's entries are relative
// to the checkpoint directory ("./state", ...), not prefixed by its name.
func (j *dockerJob) CopyCheckpoint(ctx context.Context) (io.ReadCloser, error) {
	if j.spec.CheckpointPath == "" {
		return nil, ErrNoCheckpoint
	}
	rc, _, err := j.d.cli.CopyFromContainer(ctx, j.id, j.spec.CheckpointPath+"/.")
	if err != nil {
		return nil, fmt.Errorf("executor: copy checkpoint of job %s: %w", j.spec.JobID, err)
	}
	return rc, nil
}

// Remove deletes the container, then the holder, the volumes it kept
// mounted and the job's network; the scratch tmpfs and the job's output
// never touched the daemon's disk.
func (j *dockerJob) Remove(ctx context.Context) error {
	j.mu.Lock()
	if j.removed {
		j.mu.Unlock()
		return nil
	}
	attach := j.attach
	j.mu.Unlock()
	err := j.d.cli.ContainerRemove(ctx, j.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("executor: remove job %s: %w", j.spec.JobID, err)
	}
	if err := j.d.removeResources(ctx, &j.rs); err != nil {
		return fmt.Errorf("executor: remove job %s: %w", j.spec.JobID, err)
	}
	j.mu.Lock()
	j.removed = true
	j.mu.Unlock()
	if attach != nil {
		attach.Close()
	}
	j.cancel()
	return nil
}
