//go:build unix && !linux

package executor

// processTree is, without Linux's /proc, each job's own process alone:
// its children are not told from the owner's.
func processTree(leaders map[int]JobProcess) (map[int]JobProcess, error) {
	out := make(map[int]JobProcess, len(leaders))
	for pid, jp := range leaders {
		out[pid] = jp
	}
	return out, nil
}
