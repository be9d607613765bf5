// Package executor runs a leased job on the provider's machine and owns
// everything the job leaves behind: its container, its scratch space, its
// logs. The Docker executor is the only one a public network may use; the
// process executor exists for `--network local` and says it is unsafe
// wherever it can.
//
// Lifecycle: Start returns a Job that is already running; the caller Waits,
// optionally copies the checkpoint and the outputs out, and Removes the
// job. Nothing of the renter's survives Remove. After a provider restart,
// Reconcile removes what an earlier run left behind for jobs whose leases
// are gone.
package executor

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors callers branch on.
var (
	// ErrNoDocker means the Docker engine could not be reached; the node
	// falls back to offering nothing (or, on a local network, the process
	// executor).
	ErrNoDocker = errors.New("executor: Docker engine unreachable")
	// ErrBadSpec wraps every validation failure of a Spec.
	ErrBadSpec = errors.New("executor: invalid job spec")
	// ErrNoCheckpoint is returned by CopyCheckpoint for a spec without a
	// checkpoint path.
	ErrNoCheckpoint = errors.New("executor: job has no checkpoint path")
	// ErrNoOutputs is returned by CopyOutputs for a spec without an
	// output path.
	ErrNoOutputs = errors.New("executor: job has no output path")
	// ErrUnsafeNetwork refuses the process executor on any network but local.
	ErrUnsafeNetwork = errors.New("executor: the process executor is allowed only on the local network")
)

// Labels every container, volume and network the executor creates
// carries, so that a restarted provider can tell its own leftovers from the
// owner's containers and from other nodes' jobs on the same engine.
const (
	LabelManaged = "net.gleaner.managed"
	LabelJob     = "net.gleaner.job"
	LabelLease   = "net.gleaner.lease" // the lease's CID
	// LabelNode is the peer ID of the node that created it (Owner.Node).
	LabelNode = "net.gleaner.node"
	// LabelInstance is the instance ID of the repo whose node created it
	// (Owner.Instance): copies of one repo share the peer ID, never this.
	LabelInstance = "net.gleaner.instance"
)

// Owner is whose jobs an executor creates: the node's peer ID and its
// repo's instance ID (repo.Instance). Reconcile removes only what carries
// its own instance ID, so that two processes of one identity (copies of
// one repo) sharing an engine leave each other's jobs alone.
type Owner struct {
	Node     string
	Instance string
}

// Environment variables the executor sets for the job.
const (
	EnvSimulatedGPUs  = "GLEANER_SIMULATED_GPUS"  // "1" when the GPUs are simulated
	EnvGPUUUIDs       = "GLEANER_GPU_UUIDS"       // comma-separated leased GPU UUIDs
	EnvCheckpointPath = "GLEANER_CHECKPOINT_PATH" // where to write the checkpoint
	EnvJobID          = "GLEANER_JOB_ID"
	// EnvOutputs is where to write the job's results: Spec.OutputPath
	// under Docker, a directory of the job's work directory under the
	// process executor. Unset for a spec without an output path.
	EnvOutputs = "GLEANER_OUTPUTS"
)

// Executor starts jobs and cleans up after earlier runs.
type Executor interface {
	// Kind is "docker" or "process".
	Kind() string
	// Unsafe reports that jobs are not isolated from the provider's machine.
	Unsafe() bool
	// Start pulls the image if needed and starts the job. ctx bounds the
	// start only; the job lives until it exits or is stopped.
	Start(ctx context.Context, spec Spec, hooks Hooks) (Job, error)
	// Reconcile removes every job this executor's owner created (in this
	// or an earlier process) for which keep returns false, and reports
	// their IDs. What anyone else created is never touched.
	Reconcile(ctx context.Context, keep func(jobID string) bool) (removed []string, err error)
}

// Creator is an executor that can create a job ahead of its start:
// pull the image, make the container and its resources, and start it
// later (a reservation waiting for its window).
type Creator interface {
	Create(ctx context.Context, spec Spec, hooks Hooks) (Created, error)
}

// Created is a job whose container exists but has not started. Begin
// starts it, once; a Created that never begins must still be Removed.
type Created interface {
	Job
	Begin(ctx context.Context) error
}

// Job is one running (or finished, not yet removed) job.
type Job interface {
	ID() string
	// Wait blocks until the job exits or ctx ends.
	Wait(ctx context.Context) (Result, error)
	// Stop sends SIGTERM, waits up to notice for the job to exit, then
	// sends SIGKILL; it returns once the job has exited. A paused job is
	// resumed first so that it can act on the notice.
	Stop(ctx context.Context, notice time.Duration) error
	// Pause freezes the job (late payment); Resume thaws it.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Logs is the job's combined stdout and stderr.
	Logs() *LogBuffer
	// CopyCheckpoint returns a tar stream of Spec.CheckpointPath; it works
	// after the job has exited and until Remove.
	CopyCheckpoint(ctx context.Context) (io.ReadCloser, error)
	// CopyOutputs returns a tar stream of Spec.OutputPath, with names
	// relative to it and prefixed "./" as CopyCheckpoint's are ("./" for
	// the directory itself, "./a/b" below it, directories ending in "/").
	// It works before the job begins, while it runs (what the job is
	// writing meanwhile may be torn) and after it exits, until Remove.
	// The tree is the job's work: what it holds (links, modes, names) is
	// as untrusted as the job. ErrNoOutputs for a spec without OutputPath.
	CopyOutputs(ctx context.Context) (io.ReadCloser, error)
	// Remove deletes the job and all its storage, stopping it if needed.
	// It is idempotent.
	Remove(ctx context.Context) error
}

// Hooks lets the caller observe a Start.
type Hooks struct {
	// OnPull receives image pull progress; it is called from Start's
	// goroutine and must not block for long.
	OnPull func(PullProgress)
}

// PullProgress is one event of an image pull, per layer.
type PullProgress struct {
	Image   string
	Layer   string // empty for whole-image events
	Status  string // "Downloading", "Pull complete", ...
	Current int64  // bytes, when the registry reports them
	Total   int64
}

// Result is how a job ended.
type Result struct {
	ExitCode   int
	OOMKilled  bool
	Stopped    bool // Stop was called: the job was preempted, not finished
	Killed     bool // Stop had to SIGKILL after the notice ran out
	StartedAt  time.Time
	FinishedAt time.Time
	// Pulled reports that Start had to pull the image; PullDuration is how
	// long that took, kept apart so that a slow registry is not billed as
	// run time.
	Pulled       bool
	PullDuration time.Duration
	// StdoutSHA256 is the hex sha256 of everything the job wrote to its
	// standard output (not stderr), hashed as it streamed, so that it does
	// not depend on the bounded log buffer. Renters compare it with a
	// known answer or with replicas. Empty if the stream was cut short.
	StdoutSHA256 string
}
