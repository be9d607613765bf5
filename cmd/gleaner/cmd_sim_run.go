package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
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
	if err := warnUnused(c, o, progress); err != nil {
		return err
	}
	simGC()
	start := time.Now()
	last := time.Time{}
	// Ctrl-C or SIGTERM ends c.Context: the run stops at once and nothing
	// is written, so out keeps whatever it held.
	res, err := sim.SimulateContext(c.Context, o, func(s sim.Step) {
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
	var stopped *sim.Interrupted
	if errors.As(err, &stopped) {
		where := stepName(stopped.Step.Part)
		if p := stopped.Step.Market; stopped.Step.Part == "market" {
			where = fmt.Sprintf("the market, day %.1f of %.1f", p.Now.Hours()/24, p.Stop.Hours()/24)
		}
		return &interruptedError{msg: fmt.Sprintf("interrupted (%v) during %s after %.1fs: nothing written, %s is as it was",
			stopped.Cause, where, time.Since(start).Seconds(), out)}
	}
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

// warnUnused says which flags given on the command line this run will
// not use, so that a --demand run is not taken for what it is not.
func warnUnused(c *cli.Context, o sim.Options, w io.Writer) error {
	unused := func(flag, why string) {
		if c.IsSet(flag) {
			fmt.Fprintf(w, "note: --%s is not used: %s\n", flag, why)
		}
	}
	if o.SupplyFile != "" {
		unused("providers", fmt.Sprintf("the supply is %s", o.SupplyFile))
		unused("availability", fmt.Sprintf("%s gives each provider's windows", o.SupplyFile))
	}
	if o.DemandFile == "" {
		return nil
	}
	unused("load", fmt.Sprintf("the demand is %s, as it is", o.DemandFile))
	unused("demand-trace", fmt.Sprintf("the demand is %s", o.DemandFile))
	named, err := sim.DemandCSVNamesRenters(o.DemandFile)
	if err != nil {
		return err
	}
	if named {
		unused("renters", fmt.Sprintf("%s has a renter column, which decides each job's renter", o.DemandFile))
	}
	return nil
}

func stepName(part string) string {
	switch part {
	case "":
		return "the start"
	case "supply", "demand":
		return "reading the " + part
	case "market":
		return "the market"
	case "bound":
		return "the upper bound and its check against the exact optimum"
	case "report":
		return "checking conservation, writing the report"
	}
	return "baseline: " + part
}

// printGangs is the gangs' figures (issue 36) per strategy, when the
// demand has gangs.
func printGangs(w io.Writer, r *sim.Report) {
	rows := [][]string{{"STRATEGY", "GANGS", "PLACED", "COMPLETED", "FILL", "WAIT P50", "P95", "PREEMPTED", "LOST GPU-H"}}
	for _, sr := range r.Strategies {
		if g := sr.Metrics.Gangs; g != nil {
			rows = append(rows, []string{sr.Name, fmt.Sprintf("%d", g.Jobs), fmt.Sprintf("%d", g.Placed), fmt.Sprintf("%d", g.Completed),
				pct(g.FillShare), secs(g.WaitP50Sec), secs(g.WaitP95Sec), fmt.Sprintf("%d", g.PreemptedPlacements),
				fmt.Sprintf("%.1f", g.PreemptionLostGPUHours)})
		}
	}
	if len(rows) == 1 {
		return
	}
	fmt.Fprintln(w, "\nGANGS: jobs run as members on distinct providers; wait is submit to every member running; lost is GPU-hours past the last checkpoint of placements a member's preemption stopped")
	table(w, rows)
}

// printArrays is the job arrays' figures (issue 36) per strategy, when
// the demand has arrays.
func printArrays(w io.Writer, r *sim.Report) {
	rows := [][]string{{"STRATEGY", "ARRAYS", "SHARDS", "COMPLETED", "MAKESPAN P50", "P95", "OVER IDEAL P50", "P95"}}
	for _, sr := range r.Strategies {
		if a := sr.Metrics.Arrays; a != nil {
			rows = append(rows, []string{sr.Name, fmt.Sprintf("%d", a.Arrays), fmt.Sprintf("%d", a.Shards), fmt.Sprintf("%d", a.Completed),
				secs(a.MakespanP50Sec), secs(a.MakespanP95Sec), fmt.Sprintf("%.2fx", a.OverIdealP50), fmt.Sprintf("%.2fx", a.OverIdealP95)})
		}
	}
	if len(rows) == 1 {
		return
	}
	fmt.Fprintln(w, "\nARRAYS: independent shards, at most max_parallel placed at once; makespan is submit to the last shard's end; ideal is the shards run max_parallel at a time from submit")
	table(w, rows)
}

// printSim is the run at a glance: every strategy side by side, then the
// goals, then what each strategy is and knows.
func printSim(w io.Writer, res *sim.Result) {
	r := res.Report
	fmt.Fprintf(w, "SIMULATED market: %d providers (%d GPUs), %d jobs from %d renters, %.1f days, seed %d; market ran %.0fx real time\n\n",
		r.Supply.Providers, r.Supply.GPUs, len(res.Demand.Jobs), r.Demand.Renters, res.Timing.SimDays, r.Seed, res.Timing.SimSecondsPerSecond)
	rows := [][]string{{"STRATEGY", "USEFUL GPU-H", "OF BOUND", "FILLED", "PAID (CREDITS)", "COST/ON-DEMAND", "BRONZE", "GOLD HONOURED", "DONE"}}
	for _, sr := range r.Strategies {
		m := sr.Metrics
		all, bronze := m.Tiers[0], tierOf(m, "bronze")
		rows = append(rows, []string{sr.Name, fmt.Sprintf("%.0f", m.UsefulGPUHours), pct(m.UsefulShareOfBound), pct(m.FilledShare),
			creditsText(all.Paid), pct(all.CostShare), pct(bronze.CostShare), fmt.Sprintf("%d/%d", m.Gold.Honoured, m.Gold.Made),
			pct(all.CompletionShare)})
	}
	table(w, rows)
	fmt.Fprintln(w, "\nJOB COMPLETION TIME: over completed jobs, and over all jobs with each unfinished one counted at the run's end (censored)")
	rows = [][]string{{"STRATEGY", "COMPLETED", "P50", "P95", "MEAN", "ALL: P50", "P95", "MEAN", "COUNTED AT END"}}
	for _, sr := range r.Strategies {
		all := sr.Metrics.Tiers[0]
		rows = append(rows, []string{sr.Name, fmt.Sprintf("%d", all.Completed), secs(all.JCTP50Sec), secs(all.JCTP95Sec), secs(all.JCTMeanSec),
			secs(all.JCTAllP50Sec), secs(all.JCTAllP95Sec), secs(all.JCTAllMeanSec), fmt.Sprintf("%d", all.Censored)})
	}
	table(w, rows)
	gap := "\n"
	for _, sr := range r.Strategies {
		if all := sr.Metrics.Tiers[0]; all.PreemptedRuns > 0 {
			fmt.Fprint(w, gap)
			gap = ""
			fmt.Fprintf(w, "%s: %d runs preempted; the job ran again after %d of them, p50 %s, p95 %s after the preemption\n",
				sr.Name, all.PreemptedRuns, all.Returned, secs(all.ReturnP50Sec), secs(all.ReturnP95Sec))
		}
	}
	printGangs(w, r)
	printArrays(w, r)
	fmt.Fprintln(w, "\nMAX PRICES: how much of the supply that could serve each tier's jobs their max prices exclude")
	for _, pr := range r.Demand.PriceReach {
		if pr.Jobs == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-7s %d jobs, median max price %.4g credits/GPU-h: %s of the fitting supply excluded on average, %d jobs priced out of all of it\n",
			pr.Tier, pr.Jobs, pr.MaxPriceP50, pct(pr.ExcludedShare), pr.PricedOut)
	}
	fmt.Fprintf(w, "\nupper bound: %.0f GPU-hours; %s\n\nGOALS (market)\n", r.Bound.GPUHours, r.Bound.ExactCheck)
	for _, g := range r.Goals {
		if g.Strategy != sim.MarketName {
			continue
		}
		mark, value := "met", fmt.Sprintf("%.2f %s", g.Value, g.Unit)
		switch g.Status {
		case sim.GoalMissed:
			mark = "MISSED"
		case sim.GoalNotTested:
			mark, value = "not tested", "-"
		}
		fmt.Fprintf(w, "  %-10s  %-40s %s\n", mark, g.Target, value)
		if !g.Met && g.Why != "" {
			fmt.Fprintf(w, "              %s\n", g.Why)
		}
	}
	fmt.Fprintln(w, "\nSTRATEGIES: what each is, what it knows, what renters pay")
	said := map[string]string{} // a text printed already -> for which strategy
	for _, sr := range r.Strategies {
		if sr.About.What == "" {
			continue
		}
		fmt.Fprintf(w, "  %s\n", sr.Name)
		for _, part := range [][2]string{{"is", sr.About.What}, {"knows", sr.About.Knows}, {"pays", sr.About.Pays}} {
			if first, ok := said[part[1]]; ok {
				fmt.Fprintf(w, "    %s: as %s\n", part[0], first)
				continue
			}
			said[part[1]] = sr.Name
			wrapped(w, "    "+part[0]+": ", part[1], 100)
		}
	}
	for _, n := range r.Notes {
		if strings.HasPrefix(n, "Renters: ") || strings.HasPrefix(n, "Max prices: ") || strings.Contains(n, "never ran") {
			fmt.Fprintf(w, "\nnote: %s", n)
		}
	}
	fmt.Fprintln(w)
}

// wrapped writes text after prefix, wrapped at width, later lines
// indented as far as the prefix.
func wrapped(w io.Writer, prefix, text string, width int) {
	line := prefix
	indent := strings.Repeat(" ", len(prefix))
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > width && strings.TrimSpace(line) != strings.TrimSpace(prefix) {
			fmt.Fprintln(w, line)
			line = indent
		}
		if line != indent && line != prefix {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
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

func creditsText(c auction.Credits) string { return auction.FormatCredits(c) }

func simConvertCommand() *cli.Command {
	return &cli.Command{
		Name:  "convert",
		Usage: "convert a public trace into the canonical demand CSV (docs/SIM.md)",
		Description: `Reads one of the Alibaba traces and writes every usable job as a row of the
canonical demand CSV, which --demand reads back. The traces do not say who
submitted each job, so the CSV has no renter column: gleaner sim --demand
deals its jobs over --renters. Durations are capped at --max-duration (24h,
as a sampled run caps them).

   gleaner sim convert --from alibaba-v2023 --out build/training.csv
   gleaner sim convert --from alibaba-v2025 --max-jobs 5000 --out build/serving.csv`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Required: true, Usage: "alibaba-v2023 (GPU tasks) or alibaba-v2025 (inference instances)"},
			&cli.StringFlag{Name: "in", Usage: "the trace file (default: the one in --traces)"},
			&cli.StringFlag{Name: "traces", Usage: "a directory of your own trace files (default: the public traces built into gleaner)"},
			&cli.IntFlag{Name: "max-jobs", Usage: "keep a seeded random subset of this many jobs (0: all)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the subset"},
			durationFlag("max-duration", 24*time.Hour, "cap each job's duration (0: keep the trace's, some of which no lease can hold)"),
			&cli.StringFlag{Name: "out", Required: true, Usage: "the CSV to write"},
			jsonFlag,
		},
		Action: runSimConvert,
	}
}
