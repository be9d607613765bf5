package node

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
)

// BenchmarkPartitionHeal: n nodes split in two halves (each a chain), each
// node appends 5 entries while apart, one link heals the partition; the
// time until every node holds every head is reported as heal-ms.
//
//	go test -run '^$' -bench PartitionHeal -benchtime 3x ./node
func BenchmarkPartitionHeal(b *testing.B) {
	// 50 nodes in two 25-node chains did not converge within a minute in
	// our runs (docs/PERFORMANCE.md); set GLEANER_BENCH_HEAL_50=1 to try.
	sizes := []int{6}
	if os.Getenv("GLEANER_BENCH_HEAL_50") != "" {
		sizes = append(sizes, 50)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("nodes%d", n), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				ns := make([]*feedNode, n)
				for k := range ns {
					ns[k] = newFeedNodeTB(b, ctx)
				}
				half := n / 2
				for k := 1; k < n; k++ {
					if k != half {
						linkTB(b, ctx, ns[k-1], ns[k])
					}
				}
				time.Sleep(time.Second)
				want := map[string]uint64{}
				for _, nd := range ns {
					for e := 0; e < 5; e++ {
						if _, err := nd.f.append(ledger.TypeOutcome, []byte(`{}`)); err != nil {
							b.Fatal(err)
						}
					}
					want[nd.h.ID().String()] = 5
				}
				b.StartTimer()
				start := time.Now()
				linkTB(b, ctx, ns[half-1], ns[half])
				for !converged(ns, want) {
					if time.Since(start) > time.Minute {
						b.Fatalf("%d nodes not converged after a minute", n)
					}
					time.Sleep(10 * time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				cancel()
				for _, nd := range ns {
					nd.h.Close()
					nd.f.store.Close()
				}
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "heal-ms")
		})
	}
}

func converged(ns []*feedNode, want map[string]uint64) bool {
	for _, nd := range ns {
		for author, seq := range want {
			if headOf(nd, author).Seq != seq {
				return false
			}
		}
	}
	return true
}
