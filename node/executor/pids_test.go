package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startSpawner starts a probe job that runs a child process and returns
// it with the child's PID inside the container.
func startSpawner(t testing.TB, d *Docker, gpus ...string) (Job, int) {
	t.Helper()
	spec := testSpec(t, "spawn")
	spec.GPUUUIDs, spec.SimulatedGPUs = gpus, len(gpus) > 0 // no device request: no GPU here
	j, err := d.Start(context.Background(), spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	waitForLog(t, j, "child ")
	var child int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(j.Logs().Bytes())), "child %d", &child); err != nil {
		t.Fatalf("probe output %q: %v", j.Logs().Bytes(), err)
	}
	return j, child
}

// nsPID is the PID of host process pid inside its own PID namespace
// (the last NSpid field of /proc/<pid>/status).
func nsPID(t testing.TB, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f, ok := strings.CutPrefix(line, "NSpid:"); ok {
			fs := strings.Fields(f)
			n, _ := strconv.Atoi(fs[len(fs)-1])
			return n
		}
	}
	t.Fatalf("no NSpid in /proc/%d/status", pid)
	return 0
}

// The mapping holds a running job container's main process, as the
// engine's State.Pid names it, and the child it spawned, by host PID,
// with the job's ID and GPUs; a job that ends leaves it (after the one
// Read of grace), and another owner's containers never enter it.
func TestJobPIDs(t *testing.T) {
	d := needDocker(t)
	ctx := t.Context()
	j, child := startSpawner(t, d, "GPU-a", "GPU-b")
	info, err := d.cli.ContainerInspect(ctx, j.(*dockerJob).id)
	if err != nil {
		t.Fatal(err)
	}
	main := info.State.Pid

	m := d.JobPIDs()
	var got map[int]JobProcess
	// Three processes: the engine's init (State.Pid: jobs run with
	// --init), the probe and the probe's child.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, err = m.Read(ctx); err != nil {
			t.Fatal(err)
		}
		if len(got) >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := JobProcess{JobID: j.ID(), GPUUUIDs: []string{"GPU-a", "GPU-b"}}
	if !reflect.DeepEqual(got[main], want) {
		t.Fatalf("main pid %d: %+v, want %+v (mapping %+v)", main, got[main], want, got)
	}
	found := false
	for pid, jp := range got {
		if jp.JobID != j.ID() {
			t.Errorf("pid %d of another job %q", pid, jp.JobID)
		}
		found = found || nsPID(t, pid) == child
	}
	if len(got) != 3 || !found {
		t.Fatalf("mapping %+v: want 3 processes, the probe's child (pid %d inside) among them", got, child)
	}
	if c := m.conts[info.ID]; c == nil || c.dir == "" {
		t.Errorf("the container's cgroup was not found, so each Read asks the engine: %+v", c)
	}

	// Another owner's job is not ours.
	other, err := NewDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if o, err := other.JobPIDs().Read(ctx); err != nil || len(o) != 0 {
		t.Errorf("another owner sees %+v (err %v)", o, err)
	}

	// Gone once the job ends: kept for one Read, then dropped.
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ = m.Read(ctx); got[main].JobID != j.ID() {
		t.Errorf("an ended job's pids were not kept for one Read: %+v", got)
	}
	if got, _ = m.Read(ctx); len(got) != 0 {
		t.Errorf("an ended job's pids are still mapped: %+v", got)
	}
}

// The engine's `top` stands in where the cgroup cannot be found.
func TestJobPIDsWithoutCgroup(t *testing.T) {
	d := needDocker(t)
	j, _ := startSpawner(t, d)
	m := d.JobPIDs()
	m.root = t.TempDir() // no hierarchy mounted here
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := m.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, jp := range got {
			if jp.JobID == j.ID() {
				n++
			}
		}
		if n == 3 { // init, the probe, its child
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("top fallback: %+v, want the job's three processes", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCgroupCandidates(t *testing.T) {
	v1 := "12:pids:/docker/abc\n5:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n"
	v2 := "0::/system.slice/docker-abc.scope\n"
	hybrid := "4:memory:/docker/abc\n0::/docker/abc\n"
	for _, c := range []struct {
		data string
		want []string
	}{
		{v1, []string{"/r/pids/docker/abc", "/r/cpu,cpuacct/docker/abc", "/r/systemd/docker/abc"}},
		{v2, []string{"/r/system.slice/docker-abc.scope", "/r/unified/system.slice/docker-abc.scope"}},
		{hybrid, []string{"/r/memory/docker/abc", "/r/docker/abc", "/r/unified/docker/abc"}},
		{"0::/\n", nil}, // the root cgroup is never a container's
		{"garbage\n1:x\n", nil},
	} {
		if got := cgroupCandidates("/r", []byte(c.data)); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.data, got, c.want)
		}
	}
}

// Processes of child cgroups count; an empty cgroup is an exited
// container's.
func TestCgroupPIDs(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("10\n11\n"), 0o644)
	_ = os.WriteFile(filepath.Join(sub, "cgroup.procs"), []byte("12\n"), 0o644)
	if got, err := cgroupPIDs(dir); err != nil || !slices.Equal(got, []int{10, 11, 12}) {
		t.Errorf("cgroupPIDs = %v, %v", got, err)
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644)
	_ = os.WriteFile(filepath.Join(sub, "cgroup.procs"), nil, 0o644)
	if _, err := cgroupPIDs(dir); err == nil {
		t.Error("an empty cgroup read as a running container's")
	}
}

// BenchmarkJobProcesses is one JobPIDs.Read with 2 running job
// containers (8 is too slow to start on the CI's 2 cores): the engine's
// list plus each container's cgroup.procs, as every monitor poll pays it.
// Target, with the monitor's own poll (attest's BenchmarkMonitorPoll8x8):
// under 5 ms.
func BenchmarkJobProcesses(b *testing.B) {
	d := needDocker(b)
	const jobs = 2
	for range jobs {
		startSpawner(b, d, "GPU-x")
	}
	m := d.JobPIDs()
	ctx := context.Background()
	if got, err := m.Read(ctx); err != nil || len(got) < jobs {
		b.Fatalf("first read: %d pids, %v", len(got), err)
	}
	start := time.Now()
	for b.Loop() {
		if _, err := m.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/read")
	b.ReportMetric(jobs, "jobs")
}
