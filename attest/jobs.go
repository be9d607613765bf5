package attest

import (
	"cmp"
	"context"
	"slices"
)

// JobProcesses are the processes of gleaner's own running jobs, by host
// PID (the PID the driver lists a GPU's compute processes under). The
// node builds it from its executor's containers; a process absent from
// it is the owner's.
type JobProcesses map[int]JobProcess

// JobProcess is one process of a running job: the job it belongs to and
// the UUIDs of the GPUs that job's lease gave it.
type JobProcess struct {
	Job  string
	GPUs []string // GPU UUIDs
}

// Escape is a job's process found computing on a GPU its lease did not
// give it: its container escaped its device restriction. The node stops
// that job; the process is not the owner's, so the GPU is not withdrawn
// for it.
type Escape struct {
	Job     string `json:"job"`
	PID     int    `json:"pid"`
	GPU     int    `json:"gpu"` // index
	GPUUUID string `json:"gpu_uuid"`
}

// processesOf sorts g's compute processes into the owner's (no job's)
// and the escaped (a job's, on a GPU that job did not lease). A job's
// process on a GPU it leased is in neither.
func processesOf(g GPU, own JobProcesses) (owner []int, escaped []Escape) {
	for _, p := range g.Processes {
		jp, ok := own[p.PID]
		switch {
		case !ok:
			owner = append(owner, p.PID)
		case !slices.Contains(jp.GPUs, g.UUID) || g.UUID == "":
			escaped = append(escaped, Escape{Job: jp.Job, PID: p.PID, GPU: g.Index, GPUUUID: g.UUID})
		}
	}
	return owner, escaped
}

// sortEscapes orders escapes by GPU, then PID, for stable reports.
func sortEscapes(es []Escape) {
	slices.SortFunc(es, func(a, b Escape) int {
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.PID, b.PID))
	})
}

// EscapedJobs are the distinct jobs of es, sorted.
func EscapedJobs(es []Escape) []string {
	var jobs []string
	for _, e := range es {
		jobs = append(jobs, e.Job)
	}
	slices.Sort(jobs)
	return slices.Compact(jobs)
}

// noJobs is the own-jobs callback of a Monitor given none: every compute
// process is the owner's.
func noJobs(context.Context) JobProcesses { return nil }
