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

// Set makes the Docker executor d, whose job IDs carry tag, the source.
func (o *OwnJobs) Set(d *executor.Docker, tag string) {
	o.pids.Store(&ownJobsSource{read: d.JobPIDs().Read, tag: tag})
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
		o.Log.Warn("jobs' processes not read from Docker: a new job's GPU may look busy with the owner's", "err", err)
	case err == nil && o.failed && o.Log != nil:
		o.Log.Info("jobs' processes read from Docker again")
	}
	o.failed = err != nil
}
