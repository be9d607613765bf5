package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

func jobCommand() *cli.Command {
	idArg := func(c *cli.Context) (string, error) {
		if c.Args().Len() != 1 {
			return "", usagef("job IDs: gleaner job ls", "%s needs exactly one job ID", c.Command.Name)
		}
		return c.Args().First(), nil
	}
	return &cli.Command{
		Name:  "job",
		Usage: "rent GPUs: run a job spec through a reverse auction and follow it",
		Description: `A job spec (YAML, see docs/JOBS.md) says what to run and what it needs. Your
node filters the offers it knows, asks the best providers for signed bids,
clears at the second price (plus a bounded premium for quality), signs a lease with the winner and follows the
job's output.

   gleaner job run spec.yaml            submit, then follow progress and logs to the end
   gleaner job submit spec.yaml         submit and return the job ID
   gleaner job run --provider PEER canary.yaml
                                        award only to that provider (check it with a known answer)
   gleaner job ls | status ID | logs ID [-f] | cancel ID | explain ID

Checking the work: "verify: {expect_sha256: HEX}" makes a job a canary whose
stdout must hash to HEX; "verify: {replicas: 2}" runs it on two different
providers and compares their stdout hashes (3 decide by majority). Results
are probe entries in your ledger feed and count in the providers' reputation.` + jobArrayHelp + jobGangHelp,
		Subcommands: []*cli.Command{
			{Name: "run", Usage: "submit a job spec and follow it to the end (exit code = the job's)", ArgsUsage: "<spec.yaml>",
				Description: jobRunExitCodes,
				Flags:       []cli.Flag{providerFlag, jsonFlag}, Action: func(c *cli.Context) error { return jobSubmit(c, true) }},
			{Name: "submit", Usage: "submit a job spec and print its ID", ArgsUsage: "<spec.yaml>",
				Flags: []cli.Flag{providerFlag, jsonFlag}, Action: func(c *cli.Context) error { return jobSubmit(c, false) }},
			{Name: "ls", Usage: "list this node's jobs, newest first", Flags: []cli.Flag{jsonFlag}, Action: jobList},
			{Name: "status", Usage: "one job's state, provider, price and lease", ArgsUsage: "<job-id>", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					id, err := idArg(c)
					if err != nil {
						return err
					}
					var j renting.JobRecord
					if err := callCmd(c, "job_status", node.JobIDParams{ID: id}, &j); err != nil {
						return err
					}
					return emit(c, j, func(w io.Writer) {
						if j.ArrayView != nil {
							printArray(w, j)
							return
						}
						if j.GangView != nil {
							printGang(w, j)
							return
						}
						printJob(w, j)
					})
				}},
			{Name: "logs", Usage: "a job's output (-f: keep following); an array's shard's with --shard N", ArgsUsage: "<job-id>",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "follow new output until the job ends"}, jsonFlag,
					&cli.IntFlag{Name: "shard", Value: -1, Usage: "for a job array: the output of shard `N` (0-based)"}},
				Action: func(c *cli.Context) error {
					id, err := idArg(c)
					if err != nil {
						return err
					}
					if c.IsSet("shard") {
						var a renting.JobRecord
						if err := callCmd(c, "job_status", node.JobIDParams{ID: id}, &a); err != nil {
							return err
						}
						if a.ArrayView == nil {
							return usagef("gleaner job logs "+id, "%s is one job, not an array: --shard is for arrays", id)
						}
						if id, err = shardJob(a, c.Int("shard")); err != nil {
							return err
						}
					}
					var res node.JobLogsResult
					if err := callCmd(c, "job_logs", node.JobIDParams{ID: id}, &res); err != nil {
						return err
					}
					if err := emit(c, res, func(w io.Writer) { fmt.Fprint(w, res.Logs) }); err != nil || !c.Bool("follow") {
						return err
					}
					nc, err := dial(c)
					if err != nil {
						return err
					}
					j, err := followJob(c, nc, id, false)
					if ie := interrupted(c, id, j.State); ie != nil {
						return ie
					}
					return err
				}},
			{Name: "cancel", Usage: "stop a job (the provider gives it the lease's notice)", ArgsUsage: "<job-id>", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					id, err := idArg(c)
					if err != nil {
						return err
					}
					var j renting.JobRecord
					if err := callCmd(c, "job_cancel", node.JobIDParams{ID: id}, &j); err != nil {
						return err
					}
					return emit(c, j, func(w io.Writer) { fmt.Fprintf(w, "job %s: %s\n", j.ID, j.State) })
				}},
			jobFetchCommand(),
			{Name: "explain", Usage: "why the auction came out as it did: funnel, quotes, ranking, clearing price", ArgsUsage: "<job-id>", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					id, err := idArg(c)
					if err != nil {
						return err
					}
					var ex renter.Explain
					if err := callCmd(c, "job_explain", node.JobIDParams{ID: id}, &ex); err != nil {
						return err
					}
					return emit(c, ex, func(w io.Writer) { printExplain(w, ex) })
				}},
		},
	}
}

// jobSubmit reads the spec and its secrets file (relative to the spec),
// submits it and, for `run`, follows it.
func jobSubmit(c *cli.Context, follow bool) error {
	if c.Args().Len() != 1 {
		return usagef("for example: gleaner job run train.yaml (format: docs/JOBS.md)", "%s needs exactly one job spec file", c.Command.Name)
	}
	path := c.Args().First()
	spec, err := os.ReadFile(path)
	if err != nil {
		return usagef("", "cannot read the job spec: %v", err)
	}
	secrets, err := readSecrets(path, spec)
	if err != nil {
		return err
	}
	auth, err := readRegistryAuth(path, spec)
	if err != nil {
		return err
	}
	if spec, err = absoluteInputs(path, spec); err != nil {
		return err
	}
	nc, err := dial(c)
	if err != nil {
		return err
	}
	return submitAndFollow(c, nc, spec, submitExtras{secrets: secrets, registryAuth: auth}, follow)
}

// submitExtras are what a job is sent with besides its spec, read from
// the files the spec names; none of it is stored.
type submitExtras struct {
	secrets      map[string]string
	registryAuth *wire.RegistryAuth
}

func submitAndFollow(c *cli.Context, nc *nodeClient, spec []byte, extras submitExtras, follow bool) error {
	var j renting.JobRecord
	params := node.JobSubmitParams{Spec: string(spec), Secrets: extras.secrets, RegistryAuth: extras.registryAuth}
	if c.Command.Name == "run" || c.Command.Name == "submit" {
		params.Provider = c.String("provider")
	}
	if err := nc.call(c.Context, "job_submit", params, &j); err != nil {
		return err
	}
	if j.ArrayView != nil {
		return submittedArray(c, nc, j, follow)
	}
	if j.GangView != nil {
		return submittedGang(c, nc, j, follow)
	}
	if !follow {
		// Only the ID on stdout, for ID=$(gleaner job submit spec.yaml).
		return emit(c, j, func(w io.Writer) {
			fmt.Fprintln(w, j.ID)
			fmt.Fprintf(c.App.ErrWriter, "submitted job %s\nfollow it: gleaner job logs -f %s\n", j.ID, j.ID)
			for _, r := range j.Replicas[min(len(j.Replicas), 1):] {
				fmt.Fprintf(c.App.ErrWriter, "replica:   %s (gleaner job status %s)\n", r, r)
			}
		})
	}
	if len(j.Replicas) > 1 && !c.Bool("json") {
		fmt.Fprintf(c.App.ErrWriter, "verify: %d replicas on different providers: %s\n", len(j.Replicas), strings.Join(j.Replicas, ", "))
	}
	if !c.Bool("json") {
		fmt.Fprintf(c.App.ErrWriter, "job %s submitted; auction running\n", j.ID)
	}
	final, err := followJob(c, nc, j.ID, true)
	if ie := interrupted(c, j.ID, final.State); ie != nil {
		return ie
	}
	if err != nil {
		return err
	}
	if len(j.Replicas) > 1 {
		if final, err = awaitVerdict(c, nc, final); err != nil {
			if ie := interrupted(c, j.ID, ""); ie != nil {
				return ie
			}
			return err
		}
	}
	if c.Bool("json") {
		_ = emit(c, final, nil)
	} else {
		printJob(c.App.ErrWriter, final)
		if final.State == renting.StateNoMatch {
			printNoMatch(c, nc, final.ID)
		}
	}
	return runResult(final)
}

// printNoMatch says, for a job nobody could run, why the offers refused
// it in numbers (a peak's price names the peak) and the change to the
// spec that admits the most; job explain has the rest.
func printNoMatch(c *cli.Context, nc *nodeClient, id string) {
	var ex renter.Explain
	if nc.call(c.Context, "job_explain", node.JobIDParams{ID: id}, &ex) != nil {
		return
	}
	seen := map[string]bool{}
	for _, r := range ex.Rejected {
		for _, f := range failures(r) {
			why := f.Reason
			if f.Detail != "" {
				why = f.Detail
			}
			if !seen[why] && len(seen) < 5 {
				seen[why] = true
				fmt.Fprintf(c.App.ErrWriter, "refused:   %s: %s\n", shortID(r.Provider), why)
			}
		}
	}
	if rx := ex.Relax; rx != nil {
		fmt.Fprintf(c.App.ErrWriter, "suggest:   %s to admit %d more offer(s)\n", rx.Change, rx.Admits)
	}
}

// jobRunExitCodes is `job run --help`'s word on its exit status.
const jobRunExitCodes = `Exit codes: 0 when the job completed (and, with verify:, its replicas
agreed); the job's own exit code (1..255) when its container ran and
exited non-zero, so a job that exits 3 makes job run exit 3 (and one
killed by a signal, 137 or 143); 1 when it failed otherwise (nobody could
run it, its provider was lost, its verification failed); 2 for a usage
error or an invalid spec; 130 when Ctrl-C stopped the following (the job
goes on). A job's own code may be 1, 2 or 130 too: the last line on
stderr says which it is.`

// runResult is job run's verdict on the job's final record: nil when it
// completed; a jobExitError, which the CLI exits with, when its container
// exited non-zero; a plain failure (exit 1) otherwise.
func runResult(final renting.JobRecord) error {
	switch {
	case final.State == renting.StateCompleted && (final.Verified == string(ledger.ProbeFailed) || final.Verified == string(ledger.ProbeInconclusive)):
		return fmt.Errorf("job %s completed but its verification %s: see gleaner job status for each replica", final.ID, final.Verified)
	case final.State == renting.StateCompleted:
		return nil
	case final.State == renting.StateNoMatch:
		return withHint(fmt.Errorf("no provider could run job %s: %s", final.ID, final.Error), "see why: gleaner job explain "+final.ID)
	case final.State == renting.StateFailed && final.ExitCode != nil && *final.ExitCode > 0 && *final.ExitCode <= 255:
		return &jobExitError{err: fmt.Errorf("job %s %s: %s (job run exits with the job's code)", final.ID, final.State, final.Error),
			code: *final.ExitCode}
	default:
		return fmt.Errorf("job %s %s: %s", final.ID, final.State, final.Error)
	}
}

// jobExitError is a job that ran and exited non-zero: `job run` exits
// with the job's own code (errors.go's classify asks ExitCode), as a
// shell would for the command itself.
type jobExitError struct {
	err  error
	code int
}

func (e *jobExitError) Error() string { return e.err.Error() }
func (e *jobExitError) Unwrap() error { return e.err }
func (e *jobExitError) ExitCode() int { return e.code }

// readSecrets loads secrets_file (KEY=VALUE lines), if the spec names one.
func readSecrets(specPath string, spec []byte) (map[string]string, error) {
	var file string
	for _, line := range strings.Split(string(spec), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "secrets_file:"); ok {
			file = strings.Trim(strings.TrimSpace(strings.SplitN(v, "#", 2)[0]), `"'`)
		}
	}
	if file == "" {
		return nil, nil
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(filepath.Dir(specPath), file)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("secrets_file: %v", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("secrets_file %s line %d: want KEY=VALUE", file, n)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, sc.Err()
}

// followJob prints a job's progress (to stderr) and output (to stdout)
// until it ends, and returns its final record.
//
// A follower that falls behind (a slow terminal under a flood of output) is
// dropped by the node with a notice; it says so and follows again, so the
// gap is visible and nothing is buffered without bound.
func followJob(c *cli.Context, nc *nodeClient, id string, progress bool) (renting.JobRecord, error) {
	for {
		events, err := nc.Subscribe(c.Context, "job_follow", node.JobIDParams{ID: id})
		if err != nil {
			return renting.JobRecord{}, err
		}
		dropped := false
		for raw := range events {
			var ev renting.JobEvent
			if json.Unmarshal(raw, &ev) != nil {
				continue
			}
			switch {
			case ev.Type == "dropped":
				dropped = true
				fmt.Fprintf(c.App.ErrWriter, "gleaner: %s; following again\n", ev.Note)
			case ev.Type == "log" && !c.Bool("json"):
				fmt.Fprint(c.App.Writer, ev.Log)
			case ev.Type == "state" && progress && !c.Bool("json"):
				fmt.Fprintln(c.App.ErrWriter, progressLine(ev))
			}
		}
		// After Ctrl-C too: the state is what the interruption reports. A
		// daemon that does not answer within 3 s must not hold the CLI.
		var j renting.JobRecord
		sctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), 3*time.Second)
		err = nc.call(sctx, "job_status", node.JobIDParams{ID: id}, &j)
		cancel()
		if err != nil || !dropped || c.Context.Err() != nil || renting.Terminal(j.State) {
			return j, err
		}
	}
}

func jobList(c *cli.Context) error {
	var jobs []renting.JobRecord
	if err := callCmd(c, "job_list", nil, &jobs); err != nil {
		return err
	}
	return emit(c, jobs, func(w io.Writer) {
		if len(jobs) == 0 {
			fmt.Fprintln(w, "no jobs yet (gleaner job run spec.yaml)")
			return
		}
		rows := [][]string{{"JOB", "STATE", "PROVIDER", "CREDITS/GPU-H", "CREATED"}}
		for _, j := range jobs {
			price := "-"
			if j.Price > 0 {
				price = auction.FormatCredits(j.Price)
			}
			prov := "-"
			if v := j.ArrayView; v != nil {
				prov = fmt.Sprintf("array: %d/%d done", v.Done, v.Shards)
			}
			if v := j.GangView; v != nil {
				prov = fmt.Sprintf("gang: %d members", v.Members)
			}
			if j.Provider != "" {
				prov = shortID(j.Provider)
				if j.Simulated {
					prov += " (simulated)"
				}
			}
			rows = append(rows, []string{j.ID, j.State, prov, price, j.Created.Local().Format(time.DateTime)})
		}
		table(w, rows)
	})
}

// progressLine is `job run`'s line for one of the job's state events.
// A provider reports "reserved" both for a gold reservation waiting for
// its window ("starts <its start>", ahead) and for a job that waits for
// GPUs its preempted bronze jobs are handing over (its start, the bid's
// time, has passed): only the first is said to start later.
func progressLine(ev renting.JobEvent) string {
	at := ev.Time.Local().Format("15:04:05")
	note := ev.Note
	if ev.State == renting.StateReserved {
		if start, ok := reservedStart(note); ok {
			if !start.After(ev.Time) {
				return fmt.Sprintf("[%s] %s", at, handingOver)
			}
			note = fmt.Sprintf("starts %s (in %s)", start.Local().Format(time.DateTime), start.Sub(ev.Time).Round(time.Second))
		}
	}
	if note != "" {
		note = ": " + note
	}
	return fmt.Sprintf("[%s] %s%s", at, ev.State, note)
}

// handingOver is what a job in state reserved waits for when its start
// has come: GPUs that preempted bronze jobs stop using within their
// notice.
const handingOver = "waiting for GPUs being handed over by preempted jobs, which stop within their notice"

// reservedStart is the start a provider's "reserved" note names
// ("starts 2026-12-08T09:00:00Z").
func reservedStart(note string) (time.Time, bool) {
	v, ok := strings.CutPrefix(note, "starts ")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

func printJob(w io.Writer, j renting.JobRecord) {
	state := j.State
	if j.State == renting.StateReserved && (j.Reserved == nil || time.Until(*j.Reserved) <= 0) {
		// Not a reservation waiting for its window: see progressLine.
		state += " (" + handingOver + ")"
	}
	fmt.Fprintf(w, "job:       %s\nstate:     %s\n", j.ID, state)
	if j.Provider != "" {
		sim := ""
		if j.Simulated {
			sim = " (SIMULATED GPUs)"
		}
		fmt.Fprintf(w, "provider:  %s%s%s\nprice:     %s per GPU-hour x %d GPU(s)\n", j.Provider, sim, pathNote(j.ProviderPath), credits(j.Price), j.GPUs)
		if pw := j.PriceWhy; pw != nil {
			fmt.Fprintf(w, "why:       %s\n", pw.Why)
		}
		fmt.Fprintf(w, "lease:     %s\n", j.LeaseCID)
	}
	if r := j.Reserved; r != nil {
		when := "began"
		if left := time.Until(*r); left > 0 && j.StartedAt == nil {
			when = "starts in " + left.Round(time.Second).String()
		} else if j.State == renting.StateReserved {
			when = "its window has begun"
		}
		fmt.Fprintf(w, "reserved:  %s (%s)\n", r.Local().Format(time.DateTime), when)
	}
	if j.ExitCode != nil {
		fmt.Fprintf(w, "exit code: %d\n", *j.ExitCode)
	}
	if j.StartedAt != nil && j.EndedAt != nil {
		d := j.EndedAt.Sub(*j.StartedAt)
		fmt.Fprintf(w, "ran:       %s (%s at the lease price)\n", d.Round(time.Millisecond), credits(costAt(j.Price, j.GPUs, d)))
	}
	if j.Vouchers > 0 {
		fmt.Fprintf(w, "paid:      %s in %d signed voucher(s), each covering one billing interval in advance\n", credits(j.Paid), j.Vouchers)
	}
	// The provider's charge is its word: shown only within this node's
	// own bound (the lease price for the time since it asked for the
	// start), else reported as disputed; below zero it is no charge at all.
	switch {
	case j.Charged == nil:
	case j.ChargeDisputed && *j.Charged < 0:
		fmt.Fprintf(w, "charged:   DISPUTED: the provider says %s, a negative charge, which is invalid (this node reckons the run cost at most %s)\n", credits(*j.Charged), credits(j.ChargeBound))
	case j.ChargeDisputed:
		fmt.Fprintf(w, "charged:   DISPUTED: the provider says %s, more than the %s this node reckons the run cost\n", credits(*j.Charged), credits(j.ChargeBound))
	default:
		fmt.Fprintf(w, "charged:   %s for the time run, to the second\nrefunded:  %s of the vouchers, prepaid and unused\n", credits(*j.Charged), credits(j.Refunded))
	}
	if j.Output != "" {
		fmt.Fprintf(w, "output:    sha256 %s (of stdout, as the provider reported it)\n", j.Output)
	}
	if j.Outputs != "" {
		fmt.Fprintf(w, "outputs:   %s (get them: gleaner job fetch %s <new-dir>)\n", j.Outputs, j.ID)
	}
	if j.Verified != "" {
		fmt.Fprintf(w, "verified:  %s\n", j.Verified)
	}
	if j.Canary {
		fmt.Fprintln(w, "canary:    a known-answer job this node sent to check the provider")
	}
	if tm := j.Telemetry; tm != nil {
		sim := ""
		if tm.Simulated {
			sim = ", SIMULATED GPUs"
		}
		fmt.Fprintf(w, "telemetry: %d signed samples verified, %d rejected; avg util %.0f%%, max %d°C%s\n",
			tm.Samples, tm.Rejected, tm.AvgUtilPct, tm.MaxTempC, sim)
		if tm.Contradiction != "" {
			fmt.Fprintf(w, "FRAUD:     the provider's telemetry contradicts its hardware claim: %s (proof journaled)\n", tm.Contradiction)
		}
	}
	if j.Error != "" {
		fmt.Fprintf(w, "error:     %s\n", j.Error)
	}
}

// failures is every check r's offer fails: its All, or its one check
// when it fails only that (or the record predates All).
func failures(r auction.Rejection) []auction.Failure {
	if len(r.All) > 0 {
		return r.All
	}
	return []auction.Failure{{Check: r.Check, Reason: r.Reason, Detail: r.Detail}}
}

func printExplain(w io.Writer, ex renter.Explain) {
	// The counts add up: considered = feasible + each check's removals,
	// and every rejection listed is one of those removals; providers the
	// job left are listed apart, outside the count.
	removed := 0
	for _, f := range ex.Funnel {
		removed += f.Removed
	}
	fmt.Fprintf(w, "%d offers considered: %d feasible, %d rejected\n", ex.Considered, ex.Considered-removed, removed)
	if ex.Undisturbed > 0 && ex.Undisturbed < ex.Considered-removed {
		fmt.Fprintf(w, "  %d of the feasible would run the job undisturbed (no one preempted, its window and the bookings leave it to its end): only those were asked\n", ex.Undisturbed)
	}
	for _, f := range ex.Funnel {
		if f.Removed > 0 {
			fmt.Fprintf(w, "  %6d removed by %s (the first check each failed)\n", f.Removed, f.Check)
		}
	}
	var left, checked []auction.Rejection
	for _, r := range ex.Rejected {
		if r.Check == "excluded" || r.Check == "left" { // node's withLeft
			left = append(left, r)
		} else {
			checked = append(checked, r)
		}
	}
	if len(checked) > 0 {
		fmt.Fprintf(w, "rejected offers, every check each fails (%d of %d listed):\n", len(checked), removed)
	}
	for _, r := range checked {
		fmt.Fprintf(w, "  - %s:\n", shortID(r.Provider))
		for _, f := range failures(r) {
			if f.Detail != "" {
				fmt.Fprintf(w, "      %s: %s: %s\n", f.Check, f.Reason, f.Detail)
			} else {
				fmt.Fprintf(w, "      %s: %s\n", f.Check, f.Reason)
			}
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "not considered, %d provider(s) this job left:\n", len(left))
		for _, r := range left {
			fmt.Fprintf(w, "  - %s: %s (%s)\n", shortID(r.Provider), r.Reason, r.Check)
		}
	}
	if rx := ex.Relax; rx != nil {
		fmt.Fprintf(w, "suggestion: %s to admit %d more offer(s)\n", rx.Change, rx.Admits)
	}
	if len(ex.Quotes) > 0 {
		fmt.Fprintln(w, "quotes:")
		for _, q := range ex.Quotes {
			switch {
			case q.Error != "":
				fmt.Fprintf(w, "  %s  error: %s\n", shortID(q.Provider), q.Error)
			case q.Declined != "":
				fmt.Fprintf(w, "  %s  declined: %s\n", shortID(q.Provider), q.Declined)
			default:
				fmt.Fprintf(w, "  %s  bid %s per GPU-hour\n", shortID(q.Provider), credits(q.Bid))
			}
			fmt.Fprintf(w, "  %s  rtt %s\n", strings.Repeat(" ", utf8.RuneCountInString(shortID(q.Provider))), quoteRTT(q))
		}
	}
	for i, r := range ex.Ranked {
		c := r.Credit
		fmt.Fprintf(w, "rank %d: %s effective %s = bid %s - quality %s (reputation %.2f: %s, rtt %.2f: %s [%s], locality %.2f: %s)\n",
			i+1, shortID(r.Bid.Provider), credits(r.Effective), credits(r.Bid.Price), credits(c.Total()),
			r.Parts.Reputation, auction.FormatCredits(c.Reputation), r.Parts.RTT, auction.FormatCredits(c.RTT),
			rankedRTT(r), r.Parts.Locality, auction.FormatCredits(c.Locality))
	}
	for _, a := range ex.Awards {
		switch {
		case a.Refused != "":
			fmt.Fprintf(w, "award to %s at %s per GPU-hour refused: %s\n", shortID(a.Provider), credits(a.Price), a.Refused)
		case a.Error != "":
			fmt.Fprintf(w, "award to %s at %s per GPU-hour failed: %s\n", shortID(a.Provider), credits(a.Price), a.Error)
		}
	}
	if ex.Winner != "" {
		how := "second-price clearing"
		if ex.Rule == "newcomer" { // renter.RuleNewcomer
			how = "a small job in a round open to newcomers"
		}
		fmt.Fprintf(w, "winner %s, paid %s per GPU-hour (%s)\n", shortID(ex.Winner), credits(ex.ClearingPrice), how)
		if c := ex.Clearing; c != nil {
			fmt.Fprintf(w, "why: %s\n", c.Why)
		}
	}
}

var providerFlag = &cli.StringFlag{Name: "provider", Usage: "award the job only to this provider `PEER` (a canary, or a provider you trust)"}

// awaitVerdict waits, after the first replica ended, for the others and
// the comparison of their outputs, and returns the first replica's final
// record. Progress goes to stderr.
func awaitVerdict(c *cli.Context, nc *nodeClient, first renting.JobRecord) (renting.JobRecord, error) {
	if !c.Bool("json") {
		fmt.Fprintf(c.App.ErrWriter, "waiting for the other replicas to compare outputs\n")
	}
	var allEnded time.Time
	for {
		var all []renting.JobRecord
		decided, ended := true, true
		for _, id := range first.Replicas {
			var r renting.JobRecord
			if err := nc.call(c.Context, "job_status", node.JobIDParams{ID: id}, &r); err != nil {
				return first, err
			}
			all = append(all, r)
			decided = decided && r.Verified != ""
			ended = ended && (r.State == renting.StateCompleted || r.State == renting.StateFailed || r.State == renting.StateCancelled || r.State == renting.StateNoMatch)
		}
		if ended && allEnded.IsZero() {
			allEnded = time.Now()
		}
		if !decided && ended && time.Since(allEnded) > 10*time.Second {
			return all[0], fmt.Errorf("every replica ended but the node did not compare them; see gleaner job status for each")
		}
		if decided {
			if !c.Bool("json") {
				for _, r := range all {
					fmt.Fprintf(c.App.ErrWriter, "  %-28s %-10s provider %s: %s\n", r.ID, r.State, shortID(r.Provider), r.Verified)
				}
			}
			return all[0], nil
		}
		select {
		case <-c.Context.Done():
			return first, c.Context.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// absoluteInputs makes each input's src absolute, relative to the spec
// file as secrets_file is: the daemon that imports it runs elsewhere. A
// spec that does not parse is sent as it is, for the node to report with
// its line.
func absoluteInputs(specPath string, spec []byte) ([]byte, error) {
	s, err := auction.ParseJobSpec(spec)
	if err != nil || !s.Unresolved() {
		return spec, nil
	}
	for i, in := range s.Inputs {
		if in.Src != "" && !filepath.IsAbs(in.Src) {
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(specPath), in.Src))
			if err != nil {
				return nil, err
			}
			s.Inputs[i].Src = abs
		}
	}
	return yaml.Marshal(s)
}

// readRegistryAuth loads registry_auth_file (relative to the spec), if
// the spec names one: lines username=, password=, identity_token= and
// server=, as secrets_file is written. Blank lines and # comments are
// skipped; anything else is an error naming the line, never its value.
func readRegistryAuth(specPath string, spec []byte) (*wire.RegistryAuth, error) {
	s, err := auction.ParseJobSpec(spec)
	if err != nil || s.RegistryAuthFile == "" {
		return nil, nil // a bad spec is reported by the node, with its line
	}
	file := s.RegistryAuthFile
	if !filepath.IsAbs(file) {
		file = filepath.Join(filepath.Dir(specPath), file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usagef("the file holds lines such as username=ana and password=...", "registry_auth_file: %v", err)
	}
	a := &wire.RegistryAuth{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		var dst *string
		switch strings.TrimSpace(k) {
		case "username":
			dst = &a.Username
		case "password":
			dst = &a.Password
		case "identity_token":
			dst = &a.IdentityToken
		case "server":
			dst = &a.Server
		}
		if !ok || dst == nil {
			return nil, usagef("keys: username, password, identity_token, server", "registry_auth_file %s line %d: want key=value", file, n+1)
		}
		*dst = v
	}
	if err := a.Validate(); err != nil {
		return nil, usagef("", "registry_auth_file %s: %v", file, err)
	}
	return a, nil
}

// interrupted is the error of a Ctrl-C (or SIGTERM) while the CLI followed
// job id, last seen in state: it stops the following, not the job, so it
// says where the job stands and how to follow or stop it. nil when the
// command was not interrupted, or the job had ended anyway.
func interrupted(c *cli.Context, id, state string) error {
	if c.Context.Err() == nil || renting.Terminal(state) {
		return nil
	}
	if state == "" {
		state = "unknown"
	}
	return &interruptedError{
		msg:  fmt.Sprintf("interrupted; job %s goes on (state %s)", id, state),
		hint: fmt.Sprintf("follow it again: gleaner job logs -f %s; stop it: gleaner job cancel %s", id, id),
	}
}

// pathNote says how the renter reaches the provider, when it does: a
// relayed provider's data moves through a third node (docs/NAT.md).
func pathNote(path string) string {
	switch path {
	case p2p.PathRelayed:
		return " (reached through a relay: docs/NAT.md)"
	case p2p.PathDirect:
		return " (direct connection)"
	}
	return ""
}
