package data

import (
	"context"
	"testing"
	"time"
)

// BenchmarkInputStart is what a job's start waits for to have one input
// (benchMiB) in the store: "cold", fetched from a peer, as on a provider
// that never held it; "cached", already pinned there, as on the provider
// that ran the last job with it (or pinned it as a dataset), where the
// fetch only walks the local DAG. Their difference is the time a cached
// dataset saves on the start; saved-s reports it per round.
func BenchmarkInputStart(b *testing.B) {
	p, size := benchFile(b)
	seeder := newBenchNode(b, 4*size)
	root, err := seeder.s.Add(context.Background(), p)
	if err != nil {
		b.Fatal(err)
	}
	var cold time.Duration // per round
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(size)
		var elapsed time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			n := newBenchNode(b, 4*size)
			connect(b, n.h, seeder.h)
			b.StartTimer()
			start := time.Now()
			if _, err := n.x.Fetch(context.Background(), root, nil); err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(start)
		}
		cold = elapsed / time.Duration(b.N)
	})
	b.Run("cached", func(b *testing.B) {
		n := newBenchNode(b, 4*size)
		if _, err := n.s.Add(context.Background(), p); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			res, err := n.x.Fetch(context.Background(), root, nil)
			if err != nil {
				b.Fatal(err)
			}
			if res.Peers != 0 {
				b.Fatalf("a cached input was fetched from %d peers", res.Peers)
			}
		}
		per := time.Since(start) / time.Duration(b.N)
		if cold > 0 {
			b.ReportMetric((cold - per).Seconds(), "saved-s")
		}
	})
}
