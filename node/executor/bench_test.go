package executor

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkExecutorOverhead runs the same immediately-exiting container
// through the executor (create, attach, start, wait, inspect, remove) and
// through `docker run --rm`, alternating so that both see the same machine
// load, and reports each and their ratio.
func BenchmarkExecutorOverhead(b *testing.B) {
	d := needDocker(b)
	ctx := context.Background()
	if _, err := exec.LookPath("docker"); err != nil {
		b.Fatal("the comparison needs the docker CLI on PATH")
	}
	var ours, cli time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		j, err := d.Start(ctx, testSpec(b, "exit"), Hooks{})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := j.Wait(ctx); err != nil || res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
		if err := j.Remove(ctx); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t0)

		t0 = time.Now()
		if out, err := exec.Command("docker", "run", "--rm", probeImage, "exit").CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		cli += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(ours.Seconds()*1000/n, "executor-ms/op")
	b.ReportMetric(cli.Seconds()*1000/n, "docker-run-ms/op")
	b.ReportMetric(float64(ours)/float64(cli), "ours/docker-run")
}

// BenchmarkJobNetwork is what a job with egress adds to its start and
// Remove: creating its own bridge network and removing it.
func BenchmarkJobNetwork(b *testing.B) {
	d := needDocker(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		s := testSpec(b)
		rs := jobResources{}
		var err error
		if rs.network, err = d.jobNetwork(ctx, &s); err != nil {
			b.Fatal(err)
		}
		if err := d.removeResources(ctx, &rs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuotaVolumes is what a job with a checkpoint path adds to its
// start and Remove: its tmpfs volume and the holder container that keeps it
// mounted (the holder's image is built once, before the timer starts).
func BenchmarkQuotaVolumes(b *testing.B) {
	d := needDocker(b)
	ctx := context.Background()
	if err := d.ensureHolderImage(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := testSpec(b)
		s.CheckpointPath = "/ckpt"
		var rs jobResources
		if err := d.holdVolumes(ctx, &s, s.quotaVolumes(), &rs); err != nil {
			b.Fatal(err)
		}
		if err := d.removeResources(ctx, &rs); err != nil {
			b.Fatal(err)
		}
	}
}
