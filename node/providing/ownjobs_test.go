package providing

import (
	"context"
	"errors"
	"reflect"
	"testing"

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
