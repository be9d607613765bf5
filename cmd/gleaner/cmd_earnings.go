package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/urfave/cli/v2"
)

// The owner's and the renter's money: `gleaner earnings` (provider) and
// `gleaner spend` (renter), per UTC day over --days, from the node's own
// records (ledger_earnings, ledger_spend).

var daysFlag = &cli.IntFlag{Name: "days", Value: 7, Usage: fmt.Sprintf("UTC days to cover, today included (1 to %d)", earnings.MaxReportDays)}

func earningsCommand() *cli.Command {
	return &cli.Command{
		Name:  "earnings",
		Usage: "what this node earned as a provider: per day and per job, and its fill rate",
		Description: `Per UTC day: credits earned, GPU-hours leased and offered, and the fill rate
(leased over offered GPU-hours; a lease counts on each day it ran); per lease:
job, renter, tier, GPU-hours leased and credits earned. A lease still running
shows its GPU-hours so far and earns when it settles. Offered time is what
this node recorded while it ran: the rate counts from "offered since". Days
and times are UTC.

   gleaner earnings
   gleaner earnings --days 30 --json`,
		Flags: []cli.Flag{daysFlag, jsonFlag},
		Action: func(c *cli.Context) error {
			p, err := periodParams(c)
			if err != nil {
				return err
			}
			var r earnings.Result
			if err := callCmd(c, "ledger_earnings", p, &r); err != nil {
				return err
			}
			return emit(c, r, func(w io.Writer) { printEarnings(w, r) })
		},
	}
}

func spendCommand() *cli.Command {
	return &cli.Command{
		Name:  "spend",
		Usage: "what this node spent as a renter: per job name and per day",
		Description: `Each lease counts its provider's settlement; until that has replicated, the
charge the provider reported when the job ended; before that (a job still
running), the vouchers signed so far, the most it can cost (the rest is
refunded). SOURCE says which.

   gleaner spend
   gleaner spend --days 30 --json`,
		Flags: []cli.Flag{daysFlag, jsonFlag},
		Action: func(c *cli.Context) error {
			p, err := periodParams(c)
			if err != nil {
				return err
			}
			var r earnings.SpendResult
			if err := callCmd(c, "ledger_spend", p, &r); err != nil {
				return err
			}
			return emit(c, r, func(w io.Writer) { printSpend(w, r) })
		},
	}
}

// periodParams reads --days: the one place a report's period is parsed.
func periodParams(c *cli.Context) (earnings.PeriodParams, error) {
	if c.Args().Present() {
		return earnings.PeriodParams{}, usagef("see `gleaner "+c.Command.Name+" --help`", "unexpected argument %q", c.Args().First())
	}
	d := c.Int("days")
	if d < 1 || d > earnings.MaxReportDays {
		return earnings.PeriodParams{}, usagef("see `gleaner "+c.Command.Name+" --help`", "--days %d: use 1 to %d", d, earnings.MaxReportDays)
	}
	return earnings.PeriodParams{Days: d}, nil
}

// gpuHours prints GPU-seconds as GPU-hours, exactly to the second.
func gpuHours(s int64) string {
	return fmt.Sprintf("%d.%02d GPU-h", s/3600, s%3600*100/3600)
}

// fill prints a rate in basis points as a percentage.
func fillPct(bp *int64) string {
	if bp == nil {
		return "-"
	}
	return fmt.Sprintf("%d.%02d%%", *bp/100, *bp%100)
}

func printEarnings(w io.Writer, r earnings.Result) {
	fmt.Fprintf(w, "earned:      %s from %s to %s (UTC)\n", credits(r.Earned), r.From.UTC().Format("2006-01-02"), r.To.UTC().Format("2006-01-02"))
	fmt.Fprintf(w, "fill rate:   %s (%s leased of %s offered)\n", fillPct(r.FillBP), gpuHours(r.LeasedGPUS), gpuHours(r.OfferedGPUS))
	if r.OfferedSince != nil {
		fmt.Fprintf(w, "offered since %s UTC (when this node began recording offered time)\n", r.OfferedSince.UTC().Format(time.DateTime))
	} else {
		fmt.Fprintln(w, "offered:     nothing recorded yet")
	}
	rows := [][]string{{"DAY (UTC)", "EARNED", "LEASED", "OFFERED", "FILL"}}
	for _, d := range r.Days {
		rows = append(rows, []string{d.Day, credits(d.Earned), gpuHours(d.LeasedGPUS), gpuHours(d.OfferedGPUS), fillPct(d.FillBP)})
	}
	table(w, rows)
	if len(r.Jobs) == 0 {
		fmt.Fprintln(w, "no jobs in the period")
		return
	}
	fmt.Fprintln(w)
	rows = [][]string{{"DAY (UTC)", "JOB", "RENTER", "TIER", "GPUS", "GPU-HOURS", "EARNED"}}
	for _, j := range r.Jobs {
		earned := credits(j.Earned)
		if !j.Settled {
			earned = "running (earns when it settles)"
		}
		rows = append(rows, []string{j.Day, j.JobID, j.Renter, string(j.Tier), strconv.Itoa(j.GPUs), gpuHours(j.GPUSeconds), earned})
	}
	table(w, rows)
}

func printSpend(w io.Writer, r earnings.SpendResult) {
	fmt.Fprintf(w, "spent:       %s from %s to %s (UTC)\n", credits(r.Spent), r.From.UTC().Format("2006-01-02"), r.To.UTC().Format("2006-01-02"))
	if len(r.Leases) == 0 {
		fmt.Fprintln(w, "no leases in the period")
		return
	}
	rows := [][]string{{"NAME", "JOBS", "LEASES", "SPENT"}}
	for _, n := range r.ByName {
		rows = append(rows, []string{n.Name, strconv.Itoa(n.Jobs), strconv.Itoa(n.Leases), credits(n.Spent)})
	}
	table(w, rows)
	fmt.Fprintln(w)
	rows = [][]string{{"DAY (UTC)", "SPENT"}}
	for _, d := range r.Days {
		rows = append(rows, []string{d.Day, credits(d.Spent)})
	}
	table(w, rows)
	fmt.Fprintln(w)
	rows = [][]string{{"DAY (UTC)", "NAME", "JOB", "PROVIDER", "SPENT", "SOURCE"}}
	for _, l := range r.Leases {
		rows = append(rows, []string{l.Day, l.Name, l.JobID, l.Provider, credits(l.Spent), l.Source})
	}
	table(w, rows)
}
