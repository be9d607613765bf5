package main

import (
	"os"
	"runtime/debug"
)

// simGCPercent and simMemoryLimit are the garbage collector's settings
// for a `gleaner sim` process: a run allocates a slice of the book per
// auction round and keeps little, so collecting at four times the live
// heap, not twice, took 7% to 14% off its CPU time at 10,000 providers
// (docs/PERFORMANCE.md), for about twice the memory, capped below issue
// 33's 4 GB.
const (
	simGCPercent   = 400
	simMemoryLimit = 3 << 30
)

// simGC applies them, unless GOGC or GOMEMLIMIT says otherwise. The
// results do not depend on it: only when memory is reclaimed.
func simGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(simGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(simMemoryLimit)
	}
}
