package providing

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/node/executor"
)

// OwnJobs tells the GPU monitor which compute processes are this node's
// jobs, so that a running job does not withdraw its own GPU as if the
// owner used it (issue 32). The monitor starts before the executor
// exists: until Set is called, no process is a job's.
type OwnJobs struct {
	Log  *slog.Logger // nil: the reads' failures are not logged
	pids atomic.Pointer[ownJobsSource]

	mu     sync.Mutex // guards failed
	failed bool       // the last read failed (logged once per failure spell)
}

type ownJobsSource struct {
	read func(context.Context) (map[int]executor.JobProcess, error)
	tag  string // the executor's job IDs are tag + "-" + the lease's job ID
}

// Set makes read, an executor's mapping of host PIDs to its jobs, whose
// job IDs carry tag, the source: Docker's JobPIDs().Read, or the process
// executor's JobPIDs.
func (o *OwnJobs) Set(read func(context.Context) (map[int]executor.JobProcess, error), tag string) {
	o.pids.Store(&ownJobsSource{read: read, tag: tag})
}

// SetExecutor makes exec the source if it can tell its jobs' processes
// (Docker, the process executor), and reports whether it could.
func (o *OwnJobs) SetExecutor(exec executor.Executor, tag string) bool {
	switch e := exec.(type) {
	case *executor.Docker:
		o.Set(e.JobPIDs().Read, tag)
	case *executor.Process:
		o.Set(e.JobPIDs, tag)
	default:
		return false
	}
	return true
}

// Processes is the monitor's own-jobs callback: the executor's job
// processes by host PID, each with its lease's job ID and GPUs. A failing
// engine still yields the processes of the containers it knew (see
// executor.JobPIDs.Read), and is logged.
func (o *OwnJobs) Processes(ctx context.Context) attest.JobProcesses {
	src := o.pids.Load()
	if src == nil {
		return nil
	}
	m, err := src.read(ctx)
	o.note(err)
	out := make(attest.JobProcesses, len(m))
	for pid, jp := range m {
		job, _ := strings.CutPrefix(jp.JobID, src.tag+"-")
		out[pid] = attest.JobProcess{Job: job, GPUs: jp.GPUUUIDs}
	}
	return out
}

func (o *OwnJobs) note(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err != nil && !o.failed && o.Log != nil:
		o.Log.Warn("jobs' processes not read from the executor: a new job's GPU may look busy with the owner's", "err", err)
	case err == nil && o.failed && o.Log != nil:
		o.Log.Info("jobs' processes read from the executor again")
	}
	o.failed = err != nil
}
