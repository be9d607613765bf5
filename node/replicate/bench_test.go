package replicate

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// BenchmarkPartitionHeal: n nodes split in two halves (each wired as a
// chain; the DHT adds links within a half), each node appends 5 entries
// while apart and each half converges on its own (side-ms: from the
// appends until every node holds its half's heads); then one link heals
// the partition, and the time until every node holds every head is
// reported as heal-ms. 6 and 50 nodes.
//
//	go test -run '^$' -bench PartitionHeal -benchtime 3x ./node
func BenchmarkPartitionHeal(b *testing.B) {
	for _, n := range []int{6, 50} {
		b.Run(fmt.Sprintf("nodes%d", n), func(b *testing.B) {
			var side, heal time.Duration
			for range b.N {
				b.StopTimer()
				s, h := partitionHeal(b, n)
				side += s
				heal += h
			}
			b.ReportMetric(float64(side.Milliseconds())/float64(b.N), "side-ms")
			b.ReportMetric(float64(heal.Milliseconds())/float64(b.N), "heal-ms")
		})
	}
}

// partitionHeal runs one round of BenchmarkPartitionHeal; the benchmark
// timer runs only while the halves are joined.
func partitionHeal(b *testing.B, n int) (side, heal time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := make([]*feedNode, n)
	for k := range ns {
		ns[k] = newFeedNodeTB(b, ctx)
	}
	defer func() {
		for _, nd := range ns {
			nd.h.Close()
			nd.f.store.Close()
		}
	}()
	half := n / 2
	for k := 1; k < n; k++ {
		if k != half {
			linkTB(b, ctx, ns[k-1], ns[k])
		}
	}
	time.Sleep(time.Second)
	left, right, all := map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	for k, nd := range ns {
		for range 5 {
			if _, err := nd.f.Append(ledger.TypeOutcome, []byte(`{}`)); err != nil {
				b.Fatal(err)
			}
		}
		id := nd.h.ID().String()
		all[id] = 5
		if k < half {
			left[id] = 5
		} else {
			right[id] = 5
		}
	}
	start := time.Now()
	awaitHeads(b, ns[:half], left, "left half")
	awaitHeads(b, ns[half:], right, "right half")
	side = time.Since(start)

	b.StartTimer()
	start = time.Now()
	linkTB(b, ctx, ns[half-1], ns[half])
	awaitHeads(b, ns, all, "all nodes")
	heal = time.Since(start)
	b.StopTimer()
	return side, heal
}

// awaitHeads waits until every node holds every wanted head, for a minute
// at most.
func awaitHeads(b *testing.B, ns []*feedNode, want map[string]uint64, what string) {
	start := time.Now()
	done := make([]bool, len(ns))
	for !converged(ns, want, done) {
		if time.Since(start) > time.Minute {
			b.Fatalf("%s: not converged after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// converged reports whether every node holds every wanted head. Polling
// must cost little next to what it measures, so nodes found complete are
// not read again (heads only grow).
func converged(ns []*feedNode, want map[string]uint64, done []bool) bool {
	all := true
	for i, nd := range ns {
		if done[i] {
			continue
		}
		done[i] = true
		for author, seq := range want {
			if headOf(nd, author).Seq != seq {
				done[i], all = false, false
				break
			}
		}
	}
	return all
}

// BenchmarkOwnFeedRecovery: a node that lost its ledger.db starts on an
// empty one and recovers its own feed of 10,000 entries from the one peer
// that holds it (Quorum 1: the answer ends the asking at once); reported
// is the time from the link until appends may go ahead.
//
//	go test -run '^$' -bench OwnFeedRecovery -benchtime 1x ./node/replicate
func BenchmarkOwnFeedRecovery(b *testing.B) {
	const n = 10_000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	holder := newFeedNodeTB(b, ctx)
	chain := signedChain(b, key, n, "bench")
	for lo := 0; lo < n; lo += 1000 {
		if errs, err := holder.f.store.AppendBatch(chain[lo : lo+1000]); err != nil || errorsIn(errs) {
			b.Fatal(err, errs)
		}
	}
	var total time.Duration
	for range b.N {
		b.StopTimer()
		a, stop := startFeedNode(b, ctx, key, filepath.Join(b.TempDir(), "ledger.db"), RecoverOptions{Await: true, Quorum: 1}, quietLog)
		b.StartTimer()
		start := time.Now()
		linkTB(b, ctx, a, holder)
		select {
		case <-a.f.OwnFeedRecovered():
		case <-ctx.Done():
			b.Fatal("not recovered in time")
		}
		total += time.Since(start)
		b.StopTimer()
		if h := headOf(a, a.h.ID().String()); h.Seq != n {
			b.Fatalf("recovered head = seq %d, want %d", h.Seq, n)
		}
		stop()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "recover-ms")
	b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "entries/s")
}
