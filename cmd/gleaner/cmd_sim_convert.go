package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gleaner-net/gleaner/testnet/sim"
	"github.com/urfave/cli/v2"
)

func runSimConvert(c *cli.Context) error {
	opt := sim.ConvertOptions{MaxJobs: c.Int("max-jobs"), Seed: c.Uint64("seed"), MaxDuration: int64(durationOf(c, "max-duration") / time.Second)}
	if opt.MaxJobs < 0 {
		return usagef("for example: --max-jobs 5000", "--max-jobs %d: use 0 (all) or more", opt.MaxJobs)
	}
	if opt.MaxDuration < 0 {
		return usagef("for example: --max-duration 24h", "--max-duration %v: use 0 (keep) or more", durationOf(c, "max-duration"))
	}
	in := c.String("in")
	var convert func(string, sim.ConvertOptions) (*sim.Demand, error)
	switch c.String("from") {
	case sim.TraceAlibaba2023:
		convert = sim.ConvertAlibaba2023
		if in == "" {
			in = "alibaba_v2023_openb_pod_list_default.csv"
		}
	case sim.TraceAlibaba2025:
		convert = sim.ConvertAlibaba2025
		if in == "" {
			in = "alibaba_v2025_disaggregated_DLRM_trace.csv"
		}
	default:
		return usagef("use --from alibaba-v2023 or --from alibaba-v2025", "--from %q: unknown trace", c.String("from"))
	}
	if c.String("in") == "" {
		dir, err := sim.TraceDir(c.String("traces"))
		if err != nil {
			return err
		}
		in = filepath.Join(dir, in)
	}
	d, err := convert(in, opt)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	// The traces do not say who submitted each job: no renter column, so
	// that a run deals the jobs over its --renters.
	if err := sim.WriteDemandCSVNoRenters(&buf, d); err != nil {
		return err
	}
	out := c.String("out")
	if dir := filepath.Dir(out); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	type result struct {
		Out     string   `json:"out"`
		Jobs    int      `json:"jobs"`
		Sources []string `json:"sources"`
	}
	return emit(c, result{out, len(d.Jobs), d.Sources}, func(w io.Writer) {
		fmt.Fprintf(w, "wrote %d jobs to %s\n", len(d.Jobs), out)
		for _, s := range d.Sources {
			fmt.Fprintf(w, "  %s\n", s)
		}
	})
}
