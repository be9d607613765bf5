package testnet

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkFaultSoak runs the fault soak (see soak.go) once, for
// GLEANER_SOAK_DURATION (default 2m; `make bench-smoke`, and so CI, runs
// 75s) with GLEANER_SOAK_SEED (default 1), and fails on any violated end
// check. `make soak DURATION=10m` runs the full one. The report goes to the
// log and, as JSON, to GLEANER_SOAK_REPORT if set; its figures are the
// benchmark's metrics.
func BenchmarkFaultSoak(b *testing.B) {
	d := 2 * time.Minute
	if env := os.Getenv("GLEANER_SOAK_DURATION"); env != "" {
		var err error
		if d, err = time.ParseDuration(env); err != nil {
			b.Fatalf("GLEANER_SOAK_DURATION=%q: %v (write it as 2m or 10m)", env, err)
		}
	}
	seed := uint64(1)
	if s := os.Getenv("GLEANER_SOAK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			b.Fatalf("GLEANER_SOAK_SEED=%q: want a whole number", s)
		}
	}
	requireDocker(b)
	var rep *SoakReport
	for b.Loop() {
		// The faults, then up to 5 minutes for every job to end, 90 s
		// for the ledgers, the image build and the checks.
		ctx, cancel := context.WithTimeout(context.Background(), d+12*time.Minute)
		var err error
		rep, err = RunSoak(ctx, SoakOptions{ModuleRoot: "..", Duration: d, Seed: seed, Logf: b.Logf})
		cancel()
		if rep != nil {
			var buf bytes.Buffer
			rep.WriteText(&buf)
			b.Log("\n" + buf.String())
			if path := os.Getenv("GLEANER_SOAK_REPORT"); path != "" {
				js, _ := json.MarshalIndent(rep, "", "  ")
				if werr := os.WriteFile(path, append(js, '\n'), 0o644); werr != nil {
					b.Errorf("report: %v", werr)
				}
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if rep.Failed() {
		b.Fatalf("%d end checks failed (see the report above)", len(rep.Violations))
	}
	if rep.Submitted == 0 || rep.Kills == 0 {
		b.Fatalf("the soak submitted %d jobs and killed %d daemons: it tested nothing", rep.Submitted, rep.Kills)
	}
	b.ReportMetric(float64(rep.Submitted), "jobs")
	b.ReportMetric(float64(rep.Completed), "completed")
	b.ReportMetric(float64(rep.Lost), "lost")
	b.ReportMetric(float64(rep.Kills+rep.CleanStops), "kills+stops")
	b.ReportMetric(float64(rep.FalseConvictions), "false-convictions")
	b.ReportMetric(float64(rep.DoubleBookedGPUSeconds), "double-booked-GPU-s")
	b.ReportMetric(rep.recoverySeconds(0.5), "recovery-p50-s")
	b.ReportMetric(rep.recoverySeconds(0.95), "recovery-p95-s")
	b.ReportMetric(rep.convergeSeconds(), "heal-converge-max-s")
}
