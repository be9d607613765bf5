package providing

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/node/executor"
)

// The monitor, given the node's own-jobs callback, keeps a GPU whose
// processes are its lease's job offered (issue 32), withdraws it for a
// process of no job, and reports a job's process on another GPU as an
// escape under the lease's job ID (the executor's tag stripped), which
// the scheduler stops by.
func TestOwnJobsKeepJobGPUsOffered(t *testing.T) {
	var o OwnJobs
	inv := attest.Inventory{GPUs: []attest.GPU{
		{Index: 0, UUID: "GPU-0", Processes: []attest.Process{{PID: 500}}},
		{Index: 1, UUID: "GPU-1"},
	}}
	fake := attest.NewFake(inv)
	m := attest.NewMonitor(fake, nil, o.Processes, 0)
	if av, _ := m.Check(t.Context()); av.Withdrawn[0] == "" {
		t.Fatalf("before the executor is set every process is the owner's: %+v", av)
	}

	var readErr error
	o.pids.Store(&ownJobsSource{tag: "node1", read: func(context.Context) (map[int]executor.JobProcess, error) {
		return map[int]executor.JobProcess{500: {JobID: "node1-job-a", GPUUUIDs: []string{"GPU-0"}}}, readErr
	}})
	av, _ := m.Check(t.Context())
	if !reflect.DeepEqual(av.Available, []int{0, 1}) || av.Escaped != nil {
		t.Fatalf("the job's own process withdrew its GPU: %+v", av)
	}
	readErr = errors.New("engine hiccup") // what it knew still counts
	if av, _ := m.Check(t.Context()); len(av.Available) != 2 {
		t.Fatalf("a failing engine dropped the known jobs: %+v", av)
	}
	readErr = nil

	inv.GPUs[1].Processes = []attest.Process{{PID: 500}, {PID: 9}}
	fake.Set(inv)
	av, _ = m.Check(t.Context())
	want := []attest.Escape{{Job: "job-a", PID: 500, GPU: 1, GPUUUID: "GPU-1"}}
	if !reflect.DeepEqual(av.Available, []int{0}) || !reflect.DeepEqual(av.Escaped, want) ||
		av.Withdrawn[1] != "busy with the owner's processes (pid 9)" {
		t.Fatalf("escape and owner on GPU 1: %+v", av)
	}
}

// The same rule holds under the process executor of `--network local`: a
// process job's child computing on its leased GPU leaves the GPU offered;
// a process of no job withdraws it. The child's PID is found with pgrep,
// apart from the executor's own reading of /proc.
func TestOwnJobsOfTheProcessExecutor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a process job's children are read from /proc")
	}
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Skip("no pgrep to find the job's child apart from the executor")
	}
	p, err := executor.NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	var o OwnJobs
	if !o.SetExecutor(p, "node1") {
		t.Fatal("the process executor was not taken as a source")
	}
	ctx := t.Context()
	uuid := "GPU-5f1e0c2a-0000-4000-8000-00000000000a"
	marker := fmt.Sprintf("3600.%d", time.Now().UnixNano()%1_000_000)
	spec := executor.Spec{JobID: "node1-job-p", LeaseCID: "bafy-lease-p", CPUs: 1, MemoryMiB: 64, Pids: 64,
		GPUUUIDs: []string{uuid}, Command: []string{"/bin/sh", "-c", "sleep " + marker + " & wait"}}
	j, err := p.Start(ctx, spec, executor.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = j.Remove(rctx)
	})
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(20 * time.Millisecond) {
		out, _ := exec.Command("pgrep", "-f", "-x", "sleep "+marker).Output()
		child, _ = strconv.Atoi(strings.TrimSpace(string(out)))
		if time.Now().After(deadline) {
			t.Fatal("the job's child never started")
		}
	}

	inv := attest.Inventory{GPUs: []attest.GPU{{Index: 0, UUID: uuid, Processes: []attest.Process{{PID: child}}}}}
	fake := attest.NewFake(inv)
	m := attest.NewMonitor(fake, nil, o.Processes, 0)
	for range 3 {
		if av, _ := m.Check(ctx); !reflect.DeepEqual(av.Available, []int{0}) || av.Escaped != nil {
			t.Fatalf("the process job's child %d withdrew its own GPU: %+v", child, av)
		}
	}
	foreign := exec.Command("sleep", "60")
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = foreign.Process.Kill(); _ = foreign.Wait() })
	inv.GPUs[0].Processes = append(inv.GPUs[0].Processes, attest.Process{PID: foreign.Process.Pid})
	fake.Set(inv)
	av, _ := m.Check(ctx)
	if want := fmt.Sprintf("busy with the owner's processes (pid %d)", foreign.Process.Pid); av.Withdrawn[0] != want || len(av.Available) != 0 {
		t.Fatalf("a process of no job beside the job's: %+v, want GPU 0 withdrawn: %s", av, want)
	}
}
