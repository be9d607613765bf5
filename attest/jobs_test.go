package attest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// jobsOn is a job per GPU of inv: job j<i> leased GPU i and runs pids
// 1000*(i+1) and 1000*(i+1)+1, which the fake driver lists on GPU i.
func jobsOn(inv *Inventory) JobProcesses {
	own := JobProcesses{}
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		jp := JobProcess{Job: fmt.Sprintf("j%d", i), GPUs: []string{g.UUID}}
		for _, pid := range []int{1000 * (i + 1), 1000*(i+1) + 1} {
			own[pid] = jp
			g.Processes = append(g.Processes, Process{PID: pid, UsedMiB: 900})
		}
	}
	return own
}

// The issue-32 bug: a running job's own CUDA processes, as NVML lists
// them, must not withdraw its GPU; a foreign PID must; a job's PID on a
// GPU its job did not lease is an escape, reported and not taken for the
// owner's.
func TestMonitorTellsJobsFromOwner(t *testing.T) {
	inv := gpus(40, 40, 40)
	own := jobsOn(&inv)
	fake := NewFake(inv)
	m := NewMonitor(fake, nil, func(context.Context) JobProcesses { return own }, 0)

	av, _ := m.Check(t.Context())
	if !reflect.DeepEqual(av.Available, []int{0, 1, 2}) || len(av.Withdrawn) != 0 || av.Escaped != nil {
		t.Fatalf("jobs on their own GPUs: %+v, want all offered, nothing escaped", av)
	}

	// The owner starts a process on GPU 1 beside the job's.
	inv.GPUs[1].Processes = append(inv.GPUs[1].Processes, Process{PID: 4242})
	fake.Set(inv)
	av, changed := m.Check(t.Context())
	if !changed || !reflect.DeepEqual(av.Available, []int{0, 2}) ||
		av.Withdrawn[1] != "busy with the owner's processes (pid 4242)" || av.Escaped != nil {
		t.Fatalf("owner's pid on GPU 1: %+v (changed %v)", av, changed)
	}
	inv.GPUs[1].Processes = inv.GPUs[1].Processes[:2]

	// Job j0's process turns up on GPU 2, which j2 leased, not j0.
	inv.GPUs[2].Processes = append(inv.GPUs[2].Processes, Process{PID: 1001})
	fake.Set(inv)
	av, changed = m.Check(t.Context())
	want := []Escape{{Job: "j0", PID: 1001, GPU: 2, GPUUUID: "GPU-2"}}
	if !changed || !reflect.DeepEqual(av.Escaped, want) || !reflect.DeepEqual(av.Available, []int{0, 1, 2}) {
		t.Fatalf("escaped j0: %+v (changed %v), want escaped %+v and every GPU still offered", av, changed, want)
	}
	if got := EscapedJobs(av.Escaped); !reflect.DeepEqual(got, []string{"j0"}) {
		t.Errorf("EscapedJobs = %v", got)
	}
	// The same escape again is no news; its second process on the same
	// GPU neither.
	inv.GPUs[2].Processes = append(inv.GPUs[2].Processes, Process{PID: 1000})
	fake.Set(inv)
	if av, changed := m.Check(t.Context()); changed || len(av.Escaped) != 2 {
		t.Errorf("a second pid of the same escape: changed %v, escaped %+v", changed, av.Escaped)
	}
}

// A job with no GPU at all (or a GPU without a UUID) cannot have leased
// the GPU its process is on.
func TestEscapeWithoutLease(t *testing.T) {
	own := JobProcesses{7: {Job: "cpu-only"}}
	for _, g := range []GPU{{Index: 3, UUID: "GPU-3", Processes: []Process{{PID: 7}}}, {Index: 4, Processes: []Process{{PID: 7}}}} {
		owner, esc := processesOf(g, own)
		if owner != nil || len(esc) != 1 || esc[0].Job != "cpu-only" || esc[0].GPU != g.Index {
			t.Errorf("GPU %d: owner %v escaped %+v", g.Index, owner, esc)
		}
	}
	if w, why := Withdrawn(GPU{UUID: "GPU-3", Processes: []Process{{PID: 7}}}, Limits{}, own); w {
		t.Errorf("an escaped job's process withdrew the GPU: %s", why)
	}
}

// BenchmarkMonitorPoll8x8 is one monitor poll of 8 GPUs, each running a
// job of two processes (the own-jobs mapping given, as the node's
// executor refreshes it: its own cost is the executor's
// BenchmarkJobProcesses). Target: well under 5 ms a poll.
func BenchmarkMonitorPoll8x8(b *testing.B) {
	inv := gpus(40, 40, 40, 40, 40, 40, 40, 40)
	own := jobsOn(&inv)
	m := NewMonitor(NewFake(inv), func() Limits { return Limits{MaxTempC: 85, MaxPowerW: 400} },
		func(context.Context) JobProcesses { return own }, 0)
	ctx := context.Background()
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if av, _ := m.Check(ctx); len(av.Available) != 8 {
			b.Fatalf("available %v", av.Available)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/poll")
}
