package testnet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// BenchmarkArrayMakespan: a job array's makespan, from job_submit to the
// array's end, against the ideal: the total work over the GPUs, plus one
// start (the time from submit to the first shard running: auction, lease,
// container start). Three providers of 2 simulated GPUs and a renter run
// in this process; each of the 12 shards sleeps arrayWork in the demo
// image, max_parallel 6 (the GPUs). Small enough for `make bench-smoke`;
// larger arrays with -benchtime Nx repeat it. Needs Docker.
//
//	go test -run '^$' -bench ArrayMakespan -benchtime 3x ./testnet
//
// GLEANER_BENCH_ARRAY=providers,gpus-each,shards,work sizes it otherwise:
// the full size is 10,2,100,30s (about 3 minutes a run).
// GLEANER_BENCH_LOG=file writes every node's log there, with times, to
// see where a run's time goes (docs/PERFORMANCE.md).
func BenchmarkArrayMakespan(b *testing.B) {
	providers, gpusEach, shards, arrayWork := 3, 2, 12, 3*time.Second
	if v := os.Getenv("GLEANER_BENCH_ARRAY"); v != "" {
		var work string
		if _, err := fmt.Sscanf(strings.ReplaceAll(v, ",", " "), "%d %d %d %s", &providers, &gpusEach, &shards, &work); err != nil {
			b.Fatalf("GLEANER_BENCH_ARRAY=%q: want providers,gpus-each,shards,work (10,2,100,30s): %v", v, err)
		}
		d, err := time.ParseDuration(work)
		if err != nil || providers < 1 || gpusEach < 1 || shards < 1 || d <= 0 {
			b.Fatalf("GLEANER_BENCH_ARRAY=%q: want positive providers,gpus-each,shards,work (10,2,100,30s)", v)
		}
		arrayWork = d
	}
	requireDocker(b)
	_, rc, ctx := benchOfferedMarket(b, providers, fmt.Sprintf("%dxH100", gpusEach))
	gpus := providers * gpusEach
	spec := jobSpec("arr", "bronze", "-sleep", arrayWork.String(), "-lines", "1") + fmt.Sprintf("array: {shards: %d, max_parallel: %d}\n", shards, gpus)
	var makespan, ideal time.Duration
	b.ResetTimer()
	for range b.N {
		var j renting.JobRecord
		if err := rc.Call(ctx, "job_submit", node.JobSubmitParams{Spec: spec}, &j); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(5*time.Minute + time.Duration(shards)*arrayWork); !renting.Terminal(j.State); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("array %s: not done in time: %s", j.ID, j.ArrayView.Line())
			}
			if err := rc.Call(ctx, "job_status", node.JobIDParams{ID: j.ID}, &j); err != nil {
				b.Fatal(err)
			}
		}
		if j.State != renting.StateCompleted || j.EndedAt == nil {
			b.Fatalf("array %s: %s (%s)", j.ID, j.State, j.Error)
		}
		first := time.Duration(1<<63 - 1)
		for _, sh := range j.ArrayView.ShardJobs {
			var s renting.JobRecord
			if err := rc.Call(ctx, "job_status", node.JobIDParams{ID: sh.Job}, &s); err != nil {
				b.Fatal(err)
			}
			if s.StartedAt != nil {
				first = min(first, s.StartedAt.Sub(j.Created))
			}
		}
		makespan += j.EndedAt.Sub(j.Created)
		ideal += time.Duration(shards)*arrayWork/time.Duration(gpus) + first
	}
	b.StopTimer()
	b.ReportMetric(makespan.Seconds()/float64(b.N), "makespan-s")
	b.ReportMetric(ideal.Seconds()/float64(b.N), "ideal-s")
	b.ReportMetric(float64(makespan)/float64(ideal), "x-ideal")
}

// benchOfferedMarket starts, in this process, providers nodes each selling
// simulated GPUs (spec, e.g. "2xH100") at 0.40 and a renter that sees
// every offer; it returns the cluster, the renter's client and a context
// that ends with the benchmark.
func benchOfferedMarket(b *testing.B, providers int, gpus string) (*Cluster, *rpc.Client, context.Context) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	opts := ClusterOptions{Nodes: providers + 1, Configure: func(i int, cfg *repo.Config) {
		if i < providers {
			cfg.Provider.SimulateGPUs = gpus
		}
	}}
	if path := os.Getenv("GLEANER_BENCH_LOG"); path != "" {
		// Every node's log, with times, for finding where a run's time
		// goes (docs/PERFORMANCE.md's breakdowns).
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		opts.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := NewCluster(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	waitPeers(b, c, 1, 30*time.Second)
	want := map[string]bool{}
	for i := range providers {
		cl, err := c.Client(i)
		if err != nil {
			b.Fatal(err)
		}
		offerOn(b, cl, i, "0.40")
		want[c.Nodes()[i].Host().ID().String()] = true
	}
	rc, err := c.Client(providers)
	if err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !subset(want, bookOn(b, rc, providers, "")); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the renter does not see every offer after 30 s")
		}
	}
	return c, rc, ctx
}
