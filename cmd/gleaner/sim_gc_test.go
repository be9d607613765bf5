package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// simGC sets the collector for a simulation, and leaves alone what the
// environment set.
func TestSimGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	simGC()
	if p, l := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64); p != simGCPercent || l != simMemoryLimit {
		t.Fatalf("GOGC %d, memory limit %d: want %d and %d", p, l, simGCPercent, simMemoryLimit)
	}
	t.Setenv("GOGC", "100")
	t.Setenv("GOMEMLIMIT", "1GiB")
	simGC()
	if p, l := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64); p != 100 || l != math.MaxInt64 {
		t.Fatalf("GOGC %d, memory limit %d: the environment's settings were overridden", p, l)
	}
}
