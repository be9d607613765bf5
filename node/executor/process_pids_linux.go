package executor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// processTree maps to its job every process of /proc that is a job's
// leader (leaders, by PID), a descendant of one, or in a leader's process
// group (the process executor starts each job as a group of its own).
// A process that exits during the scan is skipped. If /proc cannot be
// listed, only the leaders are returned, with the error.
func processTree(leaders map[int]JobProcess) (map[int]JobProcess, error) {
	out := make(map[int]JobProcess, len(leaders))
	for pid, jp := range leaders {
		out[pid] = jp
	}
	if len(leaders) == 0 {
		return out, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out, fmt.Errorf("executor: list /proc: %w", err)
	}
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, pgrp, ok := procStat(pid)
		if !ok {
			continue // exited meanwhile
		}
		parent[pid] = ppid
		if jp, in := leaders[pgrp]; in {
			out[pid] = jp
		}
	}
	// Each process's ancestors up to a leader; ppid chains are short and
	// end at 0 or 1, and a cycle (a PID reused during the scan) is cut.
	for pid := range parent {
		seen := 0
		for a := parent[pid]; a > 1 && seen < len(parent); a = parent[a] {
			if jp, in := leaders[a]; in {
				out[pid] = jp
				break
			}
			seen++
		}
	}
	return out, nil
}

// procStat reads the parent PID and the process group of pid from
// /proc/<pid>/stat: "PID (COMM) STATE PPID PGRP ...", where COMM may hold
// spaces and parentheses, so the fields are counted after its last ')'.
func procStat(pid int) (ppid, pgrp int, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseProcStat(data)
}

func parseProcStat(data []byte) (ppid, pgrp int, ok bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 3 { // state, ppid, pgrp
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	return ppid, pgrp, err1 == nil && err2 == nil
}
