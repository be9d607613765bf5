//go:build linux

package executor

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// psTable is every process's parent and process group as ps reports
// them: read apart from the code under test, which reads /proc itself.
func psTable(t *testing.T) (parent, group map[int]int) {
	t.Helper()
	out, err := exec.Command("ps", "-e", "-o", "pid=,ppid=,pgid=").Output()
	if err != nil {
		t.Skipf("ps: %v", err)
	}
	parent, group = map[int]int{}, map[int]int{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		parent[pid], _ = strconv.Atoi(f[1])
		group[pid], _ = strconv.Atoi(f[2])
	}
	return parent, group
}

// The process executor tells the GPU monitor its jobs' processes (issue
// 32): the job's own process, its children, and a grandchild whose
// parent exited (reparented, but still in the job's process group), each
// with the job's GPUs; not a process of the node's that is no job's. A
// process that left its job is kept for one more read, as Docker's are.
func TestProcessJobPIDsHoldTheJobsProcessTree(t *testing.T) {
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if m, err := p.JobPIDs(ctx); err != nil || len(m) != 0 {
		t.Fatalf("no job yet: %v, %v", m, err)
	}
	spec := testSpec(t)
	spec.GPUUUIDs = []string{"GPU-5f1e0c2a-0000-4000-8000-000000000001"}
	// A child that stays, and a grandchild whose parent (the subshell)
	// exits at once.
	spec.Command = []string{"/bin/sh", "-c", "sleep 60 & (sleep 61 &); wait"}
	j, err := p.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	leader := j.(*processJob).pid

	foreign := exec.Command("sleep", "60") // the node's, not the job's
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = foreign.Process.Kill(); _ = foreign.Wait() })

	// The job's processes as ps sees them: the leader's group and its
	// descendants, once both sleeps have started.
	var want []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		parent, group := psTable(t)
		want = want[:0]
		for pid := range parent {
			isDesc := false
			for a := pid; a > 1; a = parent[a] {
				if a == leader {
					isDesc = true
					break
				}
			}
			if isDesc || group[pid] == leader {
				want = append(want, pid)
			}
		}
		if len(want) >= 3 { // sh, sleep 60, sleep 61 (the subshell gone)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's processes never appeared: %v", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	slices.Sort(want)

	var got map[int]JobProcess
	// The subshell may still be exiting on the first read: read until the
	// set settles on what ps reported.
	for range 50 {
		if got, err = p.JobPIDs(ctx); err != nil {
			t.Fatal(err)
		}
		var keys []int
		for pid := range got {
			keys = append(keys, pid)
		}
		slices.Sort(keys)
		if slices.Equal(keys, want) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range want {
		jp, ok := got[pid]
		if !ok || jp.JobID != spec.JobID || !slices.Equal(jp.GPUUUIDs, spec.GPUUUIDs) {
			t.Fatalf("pid %d of the job (ps: %v) maps to %+v (present %v); all: %v", pid, want, jp, ok, got)
		}
	}
	if _, ok := got[foreign.Process.Pid]; ok {
		t.Fatalf("the node's own process %d was taken for the job's", foreign.Process.Pid)
	}
	if len(got) != len(want) {
		t.Fatalf("JobPIDs = %v, want the pids %v", got, want)
	}

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := j.Stop(stopCtx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Wait(stopCtx); err != nil {
		t.Fatal(err)
	}
	// Untracked once its leader exits; the sleeps die with their group.
	waitUntil(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.running) == 0
	})
	if m, _ := p.JobPIDs(ctx); len(m) != len(want) {
		t.Fatalf("the read after the job ended: %v, want the last read's %v kept once", m, want)
	}
	if m, _ := p.JobPIDs(ctx); len(m) != 0 {
		t.Fatalf("two reads after the job ended: %v, want none", m)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		in         string
		ppid, pgrp int
		ok         bool
	}{
		{"42 (sleep) S 7 42 7 0 -1", 7, 42, true},
		{"43 (a) b) (c) R 9 11 9 0", 9, 11, true}, // a name with parentheses and spaces
		{"44 (x", 0, 0, false},
		{"45 (x) S", 0, 0, false},
	} {
		ppid, pgrp, ok := parseProcStat([]byte(c.in))
		if ppid != c.ppid || pgrp != c.pgrp || ok != c.ok {
			t.Errorf("%q: %d %d %v, want %d %d %v", c.in, ppid, pgrp, ok, c.ppid, c.pgrp, c.ok)
		}
	}
}
