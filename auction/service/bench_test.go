package service

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkTick is one Tick of a service of n ready replicas with leases
// far from their end: the keeper's cost per service per second at rest.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			spec := parseSpec(b, fmt.Sprintf("  replicas: {min: %d, max: %d}\n", n, n), "")
			w := newWorld(b, spec, n, Config{})
			for i := range n {
				w.providers = append(w.providers, fmt.Sprintf("p%02d", i))
			}
			w.lease = time.Hour
			w.runAll()
			w.readyAll()
			o := w.observe()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if acts := w.r.Tick(t0.Add(time.Duration(i)*time.Millisecond), o); len(acts) != 0 {
					b.Fatalf("at rest: %v", acts)
				}
			}
		})
	}
}
