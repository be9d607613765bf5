package p2p

import (
	"testing"
	"time"
)

func TestQuick100(t *testing.T) {
	start := time.Now()
	hs := make([]*Host, 100)
	for i := range hs {
		hs[i] = newTestHost(t, "bench")
	}
	t.Logf("created in %v", time.Since(start))
	start = time.Now()
	wireSparse(t, hs, func(*Host, *Host) {})
	t.Logf("wired in %v", time.Since(start))
}
