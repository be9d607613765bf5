package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/gleaner-net/gleaner/testnet/sim"
	"github.com/urfave/cli/v2"
)

func runSim(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return usagef("see `gleaner sim --help`", "unexpected argument %q", c.Args().First())
	}
	o, err := simOptions(c)
	if err != nil {
		return err
	}
	out := c.String("out")
	progress := c.App.ErrWriter
	start := time.Now()
	last := time.Time{}
	res, err := sim.Simulate(o, func(s sim.Step) {
		if s.Part != "market" {
			fmt.Fprintf(progress, "%6.1fs  %s\n", time.Since(start).Seconds(), stepName(s.Part))
			return
		}
		// The market reports every simulated hour; print at most twice a
		// second, and the last hour.
		if time.Since(last) < 500*time.Millisecond && s.Market.Now+time.Hour < s.Market.Stop {
			return
		}
		last = time.Now()
		p := s.Market
		fmt.Fprintf(progress, "%6.1fs  market: day %.1f of %.1f, %d of %d jobs settled\n", time.Since(start).Seconds(),
			p.Now.Hours()/24, p.Stop.Hours()/24, p.Finished, p.Jobs)
	})
	if err != nil {
		return err
	}
	if err := res.WriteDir(out); err != nil {
		return err
	}
	fmt.Fprintf(progress, "%6.1fs  wrote %s and %s\n", time.Since(start).Seconds(), filepath.Join(out, sim.ReportJSON), filepath.Join(out, sim.ReportHTML))
	type jsonOut struct {
		Dir    string      `json:"dir"`
		Report *sim.Report `json:"report"`
		Timing sim.Timing  `json:"timing"`
	}
	return emit(c, jsonOut{Dir: out, Report: res.Report, Timing: res.Timing}, func(w io.Writer) { printSim(w, res) })
}

func stepName(part string) string {
	switch part {
	case "supply", "demand":
		return "reading the " + part
	case "bound":
		return "the upper bound and its check against the exact optimum"
	case "report":
		return "checking conservation, writing the report"
	}
	return "baseline: " + part
}

// printSim is the run at a glance: every strategy side by side, then the
// goals.
func printSim(w io.Writer, res *sim.Result) {
	r := res.Report
	fmt.Fprintf(w, "SIMULATED market: %d providers (%d GPUs), %d jobs, %.1f days, seed %d; market ran %.0fx real time\n\n",
		r.Supply.Providers, r.Supply.GPUs, len(res.Demand.Jobs), res.Timing.SimDays, r.Seed, res.Timing.SimSecondsPerSecond)
	rows := [][]string{{"STRATEGY", "USEFUL GPU-H", "OF BOUND", "FILLED", "COST/ON-DEMAND", "BRONZE", "GOLD HONOURED", "DONE", "JCT P50", "JCT P95"}}
	for _, sr := range r.Strategies {
		m := sr.Metrics
		all, bronze := m.Tiers[0], tierOf(m, "bronze")
		rows = append(rows, []string{sr.Name, fmt.Sprintf("%.0f", m.UsefulGPUHours), pct(m.UsefulShareOfBound), pct(m.FilledShare),
			pct(all.CostShare), pct(bronze.CostShare), fmt.Sprintf("%d/%d", m.Gold.Honoured, m.Gold.Made), pct(all.CompletionShare),
			secs(all.JCTP50Sec), secs(all.JCTP95Sec)})
	}
	table(w, rows)
	for _, sr := range r.Strategies {
		if all := sr.Metrics.Tiers[0]; all.PreemptedRuns > 0 {
			fmt.Fprintf(w, "%s: %d runs preempted; the job ran again after %d of them, p50 %s, p95 %s after the preemption\n",
				sr.Name, all.PreemptedRuns, all.Returned, secs(all.ReturnP50Sec), secs(all.ReturnP95Sec))
		}
	}
	fmt.Fprintf(w, "\nupper bound: %.0f GPU-hours; %s\n\nGOALS (market)\n", r.Bound.GPUHours, r.Bound.ExactCheck)
	for _, g := range r.Goals {
		if g.Strategy != sim.MarketName {
			continue
		}
		mark := "met   "
		if !g.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  %s  %-40s %.2f %s\n", mark, g.Target, g.Value, g.Unit)
		if !g.Met && g.Why != "" {
			fmt.Fprintf(w, "          %s\n", g.Why)
		}
	}
}

func tierOf(m sim.Metrics, tier string) sim.TierMetrics {
	for _, t := range m.Tiers {
		if t.Tier == tier {
			return t
		}
	}
	return sim.TierMetrics{}
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func secs(s int64) string { return (time.Duration(s) * time.Second).String() }

func simConvertCommand() *cli.Command {
	return &cli.Command{
		Name:  "convert",
		Usage: "convert a public trace into the canonical demand CSV (docs/SIM.md)",
		Description: `Reads one of the Alibaba traces and writes every usable job as a row of the
canonical demand CSV, which --demand reads back.

   gleaner sim convert --from alibaba-v2023 --out build/training.csv
   gleaner sim convert --from alibaba-v2025 --max-jobs 5000 --out build/serving.csv`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Required: true, Usage: "alibaba-v2023 (GPU tasks) or alibaba-v2025 (inference instances)"},
			&cli.StringFlag{Name: "in", Usage: "the trace file (default: the one in --traces)"},
			&cli.StringFlag{Name: "traces", Usage: "a directory of your own trace files (default: the public traces built into gleaner)"},
			&cli.IntFlag{Name: "max-jobs", Usage: "keep a seeded random subset of this many jobs (0: all)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the subset"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "the CSV to write"},
			jsonFlag,
		},
		Action: runSimConvert,
	}
}
