package executor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// The GPU driver lists a GPU's compute processes by host PID, and the
// node must tell its jobs' processes from the owner's (attest.Withdrawn):
// JobPIDs maps the host PIDs of every running job container of this
// executor's owner to the job and the GPUs its lease gave it.

// JobProcess is the job a host process belongs to.
type JobProcess struct {
	JobID    string   // the executor's job ID (Spec.JobID)
	GPUUUIDs []string // the GPUs the job's lease gave it (Spec.GPUUUIDs)
}

// JobPIDs reads, on each Read, the host PIDs of the processes of every
// job container of its Docker's owner that runs (or is paused). A
// container is inspected once, when first seen, for its main PID, its
// GPUs and its cgroup; each Read then lists the containers (one engine
// call) and reads their cgroups' cgroup.procs, so a poll costs about a
// millisecond, not a `docker top` per job.
type JobPIDs struct {
	d    *Docker
	root string // where the cgroup hierarchies are mounted

	mu    sync.Mutex // guards everything below; one Read at a time
	conts map[string]*jobCgroup
	last  map[int]JobProcess
}

// jobCgroup is what JobPIDs learnt of one container when it first saw it.
type jobCgroup struct {
	proc JobProcess
	pid  int    // its main process, State.Pid
	dir  string // its cgroup directory; "" if none was found: ask the engine
}

// JobPIDs returns d's mapping of host PIDs to jobs.
func (d *Docker) JobPIDs() *JobPIDs {
	return &JobPIDs{d: d, root: "/sys/fs/cgroup", conts: map[string]*jobCgroup{}}
}

// Read returns every process of the owner's running job containers by
// host PID. A process that left its job since the previous Read is kept
// for that one Read: the driver's process list, read just before, may
// still name a process that exited meanwhile, which would otherwise look
// like the owner's. If the engine cannot list the containers, Read
// returns the processes of those it already knew, with the error.
func (p *JobPIDs) Read(ctx context.Context) (map[int]JobProcess, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	listErr := p.refresh(ctx)
	now := map[int]JobProcess{}
	for id, c := range p.conts {
		pids, err := p.pidsOf(ctx, id, c)
		if err != nil {
			delete(p.conts, id) // exited; listed again if it still runs
			continue
		}
		for _, pid := range pids {
			now[pid] = c.proc
		}
	}
	out := make(map[int]JobProcess, len(now)+len(p.last))
	for pid, jp := range p.last {
		out[pid] = jp
	}
	for pid, jp := range now {
		out[pid] = jp
	}
	p.last = now
	return out, listErr
}

// refresh lists the owner's running job containers, inspects the new
// ones and forgets those that no longer run.
func (p *JobPIDs) refresh(ctx context.Context) error {
	owned := filters.NewArgs(filters.Arg("label", LabelManaged+"=1"),
		filters.Arg("label", LabelInstance+"="+p.d.owner.Instance))
	list, err := p.d.cli.ContainerList(ctx, container.ListOptions{Filters: owned}) // running and paused
	if err != nil {
		return fmt.Errorf("executor: list job containers: %w", err)
	}
	seen := map[string]bool{}
	var errs []error
	for _, c := range list {
		if c.Labels[LabelRole] != "" {
			continue // a helper (volume holder, input filler), never given a GPU
		}
		seen[c.ID] = true
		if p.conts[c.ID] != nil {
			continue
		}
		jc, err := p.inspect(ctx, c.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.conts[c.ID] = jc
	}
	for id := range p.conts {
		if !seen[id] {
			delete(p.conts, id)
		}
	}
	return errors.Join(errs...)
}

func (p *JobPIDs) inspect(ctx context.Context, id string) (*jobCgroup, error) {
	info, err := p.d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("executor: inspect job container %.12s: %w", id, err)
	}
	if info.State == nil || info.State.Pid <= 0 || info.Config == nil {
		return nil, fmt.Errorf("executor: job container %.12s has no process", id)
	}
	jc := &jobCgroup{pid: info.State.Pid, proc: JobProcess{JobID: info.Config.Labels[LabelJob]}}
	// The executor set it (the GLEANER_ prefix is reserved from renters).
	if u := envOf(info.Config.Env, EnvGPUUUIDs); u != "" {
		jc.proc.GPUUUIDs = strings.Split(u, ",")
	}
	// A cgroup that does not hold the main process is not the
	// container's (a cgroup namespace, an unusual mount): the engine is
	// asked instead.
	if dir, err := cgroupDir(p.root, jc.pid); err == nil {
		if pids, err := cgroupPIDs(dir); err == nil && containsPID(pids, jc.pid) {
			jc.dir = dir
		}
	}
	return jc, nil
}

// pidsOf reads the container's processes from its cgroup, or from the
// engine (`docker top`) where the cgroup could not be found.
func (p *JobPIDs) pidsOf(ctx context.Context, id string, c *jobCgroup) ([]int, error) {
	if c.dir != "" {
		return cgroupPIDs(c.dir)
	}
	top, err := p.d.cli.ContainerTop(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	col := -1
	for i, t := range top.Titles {
		if t == "PID" {
			col = i
		}
	}
	if col < 0 {
		return nil, fmt.Errorf("executor: top of %.12s has no PID column: %v", id, top.Titles)
	}
	var pids []int
	for _, row := range top.Processes {
		if col < len(row) {
			if pid, err := strconv.Atoi(row[col]); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// cgroupDir finds pid's cgroup directory under root from
// /proc/<pid>/cgroup, whose lines read "ID:CONTROLLERS:PATH": under
// cgroup v1 a hierarchy's directory is named after its controllers
// ("pids", "cpu,cpuacct"), under v2 there is one line "0::PATH" (mounted
// at root, or at root/unified beside v1). v1's pids or memory hierarchy
// is preferred where there is one (it holds every process); the root
// cgroup ("/") is never a container's.
func cgroupDir(root string, pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, dir := range cgroupCandidates(root, data) {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("executor: no cgroup directory of pid %d under %s", pid, root)
}

// cgroupCandidates are the directories /proc/<pid>/cgroup's data names,
// best first.
func cgroupCandidates(root string, data []byte) []string {
	var first, rest, unified []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") || parts[2] == "/" {
			continue
		}
		ctrls, path := parts[1], parts[2]
		switch {
		case ctrls == "":
			unified = append(unified, filepath.Join(root, path), filepath.Join(root, "unified", path))
		case strings.HasPrefix(ctrls, "name="):
			rest = append(rest, filepath.Join(root, strings.TrimPrefix(ctrls, "name="), path))
		case hasController(ctrls, "pids") || hasController(ctrls, "memory"):
			first = append(first, filepath.Join(root, ctrls, path))
		default:
			rest = append(rest, filepath.Join(root, ctrls, path))
		}
	}
	return append(append(first, unified...), rest...)
}

func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// cgroupPIDs reads cgroup.procs of dir and of every cgroup below it (a
// job cannot make any without write access to its cgroup, but the engine
// or a runtime may).
func cgroupPIDs(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil // a child cgroup removed meanwhile
		}
		if !e.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			if path == dir {
				return err
			}
			return nil
		}
		for _, f := range bytes.Fields(data) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	if err == nil && len(pids) == 0 {
		// An empty cgroup is one whose container has exited.
		return nil, fmt.Errorf("executor: cgroup %s holds no process", dir)
	}
	return pids, err
}

func containsPID(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}
