package console

import (
	"testing"
	"time"
)

func TestKeyedRingsBoundGapWrapAndDrop(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	kr := newKeyedRings[int, gpuSample](3, 2, 30*time.Second)
	for i := range 5 { // a minute apart: the ring of 3 keeps the last 3
		kr.add(0, gpuSample{At: t0.Add(time.Duration(i) * time.Minute), TempC: i})
	}
	kr.add(0, gpuSample{At: t0.Add(4*time.Minute + 10*time.Second), TempC: 99}) // within the gap: dropped
	got := kr.samples(0)
	if len(got) != 3 || got[0].TempC != 2 || got[1].TempC != 3 || got[2].TempC != 4 {
		t.Fatalf("samples %+v, want temperatures 2, 3, 4 oldest first", got)
	}
	kr.add(1, gpuSample{At: t0})
	kr.add(2, gpuSample{At: t0}) // a third key past the bound of 2
	if kr.keys() != 2 || kr.samples(2) != nil {
		t.Fatalf("%d keys, key 2's samples %v: want the bound of 2 kept", kr.keys(), kr.samples(2))
	}
	kr.dropUnless(func(_ int, last gpuSample) bool { return last.At.After(t0) })
	if kr.keys() != 1 || kr.samples(1) != nil || len(kr.samples(0)) != 3 {
		t.Fatalf("after dropping key 1 (last sample at t0): %d keys", kr.keys())
	}
}
