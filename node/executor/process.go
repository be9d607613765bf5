//go:build unix

package executor

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// unsafeBanner starts every process job's output, so that nobody reading
// the logs can mistake such a run for an isolated one.
const unsafeBanner = "[gleaner] UNSAFE: process executor; this job runs without isolation, limits or GPU pinning on the provider's machine (--network local only)\n"

var _ Executor = (*Process)(nil)

// Process runs jobs as plain child processes of the node. It exists so that
// a developer without Docker can try the whole market on `--network local`;
// it enforces none of the isolation or limits of the Docker executor, which
// is why NewProcess refuses every other network and Unsafe reports true.
type Process struct {
	root    string // one work directory per job, removed with the job
	logSize int

	mu      sync.Mutex             // guards running and lastPIDs
	running map[string]*processJob // by job ID, until its process exits
	// lastPIDs is what JobPIDs returned last (see JobPIDs).
	lastPIDs map[int]JobProcess
}

// NewProcess returns the process executor, only for the network "local".
func NewProcess(network string) (*Process, error) {
	if network != "local" {
		return nil, fmt.Errorf("%w (network %q)", ErrUnsafeNetwork, network)
	}
	root := filepath.Join(os.TempDir(), fmt.Sprintf("gleaner-process-jobs-%d", os.Getuid()))
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	return &Process{root: root, logSize: DefaultLogBytes}, nil
}

func (p *Process) Kind() string { return "process" }
func (p *Process) Unsafe() bool { return true }

// Start runs spec.Command; the image is ignored. The job's working
// directory, TMPDIR, checkpoint directory, inputs and outputs directory
// (EnvOutputs; no quota) live under the executor's root.
func (p *Process) Start(ctx context.Context, spec Spec, hooks Hooks) (Job, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("%w: the process executor needs a command", ErrBadSpec)
	}
	work := filepath.Join(p.root, spec.JobID)
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, fmt.Errorf("executor: job %s: %w", spec.JobID, err)
	}
	ckpt, outs := "", ""
	if spec.CheckpointPath != "" {
		ckpt = filepath.Join(work, "checkpoint")
	}
	if spec.OutputPath != "" {
		outs = filepath.Join(work, "outputs")
	}
	for _, dir := range []string{filepath.Join(work, "tmp"), ckpt, outs} {
		if dir != "" {
			if err := os.Mkdir(dir, 0o700); err != nil {
				os.RemoveAll(work)
				return nil, err
			}
		}
	}
	if len(spec.Restore) > 0 && ckpt != "" {
		if err := untar(spec.Restore, ckpt); err != nil {
			os.RemoveAll(work)
			return nil, fmt.Errorf("executor: restore checkpoint of job %s: %w", spec.JobID, err)
		}
	}
	inputs, err := processInputs(ctx, &spec, work)
	if err != nil {
		os.RemoveAll(work)
		return nil, fmt.Errorf("executor: inputs of job %s: %w", spec.JobID, err)
	}
	j := &processJob{spec: spec, work: work, ckpt: ckpt, outs: outs, logs: NewLogBuffer(p.logSize), done: make(chan struct{})}
	j.logs.Write([]byte(unsafeBanner))
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = work
	cmd.Env = append(spec.environ(ckpt, inputs, outs), "PATH="+os.Getenv("PATH"), "HOME="+work,
		"TMPDIR="+filepath.Join(work, "tmp"), "GLEANER_UNSAFE_EXECUTOR=1")
	j.out = newOutputHash()
	cmd.Stdout, cmd.Stderr = j.out.tee(j.logs), j.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // signal the whole job, not just its leader
	j.res.StartedAt = time.Now()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(work)
		return nil, fmt.Errorf("executor: start job %s: %w", spec.JobID, err)
	}
	j.pid = cmd.Process.Pid
	p.track(j)
	go func() {
		j.wait(cmd)
		p.untrack(j)
	}()
	return j, nil
}

func (p *Process) track(j *processJob) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.running = map[string]*processJob{}
	}
	p.running[j.spec.JobID] = j
}

func (p *Process) untrack(j *processJob) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running[j.spec.JobID] == j {
		delete(p.running, j.spec.JobID)
	}
}

// JobPIDs tells the GPU monitor which host processes are this executor's
// jobs', as Docker's JobPIDs.Read does, so that a process job computing
// on its own GPU does not withdraw it as the owner's (issue 32): each
// running job's process, every descendant of it and every process still
// in its process group (a child that was reparented after its parent
// exited), by PID, with the job's GPUs. A process that left its job since
// the previous call is kept for that one call, as Docker's are. Where
// /proc cannot be read (not Linux) only each job's own process is known.
func (p *Process) JobPIDs(ctx context.Context) (map[int]JobProcess, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	leaders := make(map[int]JobProcess, len(p.running))
	for _, j := range p.running {
		leaders[j.pid] = JobProcess{JobID: j.spec.JobID, GPUUUIDs: j.spec.GPUUUIDs}
	}
	now, err := processTree(leaders)
	out := make(map[int]JobProcess, len(now)+len(p.lastPIDs))
	for pid, jp := range p.lastPIDs {
		out[pid] = jp
	}
	for pid, jp := range now {
		out[pid] = jp
	}
	p.lastPIDs = now
	return out, err
}

// processInputs unpacks each of spec's inputs, checked as for Docker
// (checkInputTar), into inputs/N of the job's work directory, and returns
// the directories, which the job finds in its environment as
// GLEANER_INPUT_N (EnvInputPrefix). A process has no mount namespace, so
// it cannot see an input at its Target: a job meant to run under both
// executors reads GLEANER_INPUT_N, which the Docker executor sets to the
// Target. Nor is the tree read-only here: the job runs as the provider's
// user, who owns the files; on `--network local` that is accepted.
func processInputs(ctx context.Context, spec *Spec, work string) ([]string, error) {
	dirs := make([]string, len(spec.Inputs))
	for i, in := range spec.Inputs {
		dir := filepath.Join(work, "inputs", strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		err := readInput(ctx, in, func(r io.Reader) error {
			if err := untarFrom(r, dir, "input"); err != nil {
				return err
			}
			_, err := io.Copy(io.Discard, r) // to the stream's end, which tells the input is whole
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("input %d (%s, %d bytes): %w", i, in.Target, in.Bytes, err)
		}
		dirs[i] = dir
	}
	return dirs, nil
}

// Adopt implements Adopter: a process job cannot be taken over. Its
// process may outlive the node, but nothing proves that a PID found
// later is still the job's.
func (p *Process) Adopt(context.Context, string) (Adopted, error) {
	return nil, ErrNotAdoptable
}

// Reconcile removes the work directories of jobs not kept. Processes
// started by an earlier run of the node are not tracked; on `--network
// local` that is accepted.
func (p *Process) Reconcile(ctx context.Context, keep func(jobID string) bool) ([]string, error) {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !keep(e.Name()) {
			if err := os.RemoveAll(filepath.Join(p.root, e.Name())); err != nil {
				return removed, err
			}
			removed = append(removed, e.Name())
		}
	}
	return removed, nil
}

type processJob struct {
	spec             Spec
	work, ckpt, outs string // outs: the outputs directory, "" for none
	pid              int
	logs             *LogBuffer
	out              *outputHash
	done             chan struct{} // closed once res is final

	mu  sync.Mutex // guards res
	res Result
}

func (j *processJob) wait(cmd *exec.Cmd) {
	err := cmd.Wait()
	j.logs.Close()
	j.mu.Lock()
	defer j.mu.Unlock()
	defer close(j.done)
	j.res.FinishedAt = time.Now()
	j.res.ExitCode = cmd.ProcessState.ExitCode()
	j.res.StdoutSHA256 = j.out.Sum() // Wait returns once the output is copied
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			j.res.ExitCode = 128 + int(ws.Signal()) // as a container reports it
		}
	}
}

func (j *processJob) ID() string       { return j.spec.JobID }
func (j *processJob) Logs() *LogBuffer { return j.logs }

func (j *processJob) Wait(ctx context.Context) (Result, error) {
	select {
	case <-j.done:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.res, nil
}

func (j *processJob) signal(sig syscall.Signal) error {
	select {
	case <-j.done:
		return nil
	default:
	}
	if err := syscall.Kill(-j.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("executor: signal job %s: %w", j.spec.JobID, err)
	}
	return nil
}

func (j *processJob) Stop(ctx context.Context, notice time.Duration) error {
	j.mu.Lock()
	j.res.Stopped = true
	j.mu.Unlock()
	_ = j.signal(syscall.SIGCONT) // a paused job could not act on the notice
	return stopWithNotice(ctx, notice, j.done,
		func() error { return j.signal(syscall.SIGTERM) },
		func() error { return j.signal(syscall.SIGKILL) },
		func() { j.mu.Lock(); j.res.Killed = true; j.mu.Unlock() })
}

func (j *processJob) Pause(ctx context.Context) error  { return j.signal(syscall.SIGSTOP) }
func (j *processJob) Resume(ctx context.Context) error { return j.signal(syscall.SIGCONT) }

// CopyCheckpoint tars the checkpoint directory with "./"-relative names,
// as the Docker executor does.
func (j *processJob) CopyCheckpoint(ctx context.Context) (io.ReadCloser, error) {
	if j.ckpt == "" {
		return nil, ErrNoCheckpoint
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := filepath.WalkDir(j.ckpt, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !(d.IsDir() || d.Type().IsRegular()) {
				return err
			}
			rel, _ := filepath.Rel(j.ckpt, path)
			info, err := d.Info()
			if err != nil {
				return err
			}
			hdr, err := tar.FileInfoHeader(info, "")
			if err != nil {
				return err
			}
			hdr.Name = "./" + filepath.ToSlash(rel)
			if err := tw.WriteHeader(hdr); err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

func (j *processJob) Remove(ctx context.Context) error {
	if err := j.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return os.RemoveAll(j.work)
}
