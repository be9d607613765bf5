package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/testnet/sim"
	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

const simHelp = `Runs the market in virtual time: every provider and renter runs the real
auctioneer, scheduler, billing and reputation code over an in-memory network,
on supply and demand drawn from public traces built into gleaner (or your own
CSVs), beside central baselines (random, first-fit, greedy-cheapest, an online
central scheduler) and an upper bound no schedule can beat. The GPUs are
simulated. The same seed gives a byte-identical report.json.

   gleaner sim --providers 200 --days 7 --out build/sim
   gleaner sim --providers 1000 --days 2 --adversaries skip=0.05,fake=0.05 --out build/sim
   gleaner sim --demand my-demand.csv --supply my-supply.csv --out build/sim
   gleaner sim --config sim.yaml --seed 7 --json
   gleaner sim convert --from alibaba-v2025 --out build/serving.csv

Writes report.json (every figure), report.html (plots), timing.json (speed
here), supply.csv and demand.csv (what was simulated, to feed back in).
Every job is checked before the run; a bad row fails it naming file:line.
Ctrl-C or SIGTERM stops a run at once, writing nothing (exit code 130).
docs/SIM.md explains every figure, every flag and the CSV formats.`

func simCommand() *cli.Command {
	return &cli.Command{
		Name:        "sim",
		Usage:       "simulate the market on real traces, against central baselines and an upper bound",
		Description: simHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "YAML file of options (docs/SIM.md); flags given override it"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed: the same seed and options give the same report"},
			&cli.IntFlag{Name: "providers", Value: 200, Usage: "providers to draw from the node lists (not used with --supply)"},
			&cli.IntFlag{Name: "renters", Value: 100, Usage: "renters the demand is spread over: each sampled job's drawn among them; a --demand CSV's jobs dealt over them in turn, unless it has a renter column"},
			&cli.Float64Flag{Name: "days", Value: 7, Usage: "simulated days"},
			&cli.Float64Flag{Name: "load", Value: 0.8, Usage: "demanded GPU-hours over offered idle GPU-hours (sampled demand only: not used with --demand)"},
			&cli.StringFlag{Name: "supply", Usage: "canonical supply CSV instead of drawing from the traces"},
			&cli.StringFlag{Name: "demand", Usage: "canonical demand CSV (docs/SIM.md) instead of sampling a trace"},
			&cli.StringFlag{Name: "demand-trace", Value: sim.TraceAlibaba2023, Usage: "trace to sample demand from: alibaba-v2023 or alibaba-v2025"},
			&cli.IntFlag{Name: "gang-width", Usage: "run every silver or bronze job wider than this many GPUs as a gang of members on distinct providers (0: none; 1..8)"},
			&cli.IntFlag{Name: "array-split", Usage: "run every silver or bronze batch job longer than an hour as a job array of this many shards (0: none; 2..64)"},
			&cli.IntFlag{Name: "array-parallel", Usage: "with --array-split: at most this many shards of an array placed at once (0: every shard)"},
			&cli.StringFlag{Name: "availability", Value: sim.AvailMixed, Usage: "providers' idle windows: Microsoft99, Nd07cpu, mixed or always"},
			&cli.StringFlag{Name: "adversaries", Usage: "shares of cheating nodes, e.g. skip=0.05,fake=0.05,abandon=0.05,refuse=0.05,nonpayer=0.1"},
			&cli.StringFlag{Name: "baselines", Usage: "comma-separated baselines to run (default all: random,first-fit,greedy-cheapest,central-online)"},
			durationFlag("latency", sim.DefaultNetwork().Latency, "one-way latency within a continent (4x across)"),
			&cli.Float64Flag{Name: "loss", Value: sim.DefaultNetwork().Loss, Usage: "share of market messages lost"},
			&cli.StringFlag{Name: "traces", Usage: "a directory of your own trace files (default: the public traces built into gleaner)"},
			&cli.StringFlag{Name: "out", Value: "build/sim", Usage: "directory for report.json, report.html and the rest"},
			jsonFlag,
		},
		Action:      runSim,
		Subcommands: []*cli.Command{simConvertCommand()},
	}
}

// simOptions builds the run's options: defaults, then the config file,
// then every flag the user gave.
func simOptions(c *cli.Context) (sim.Options, error) {
	o := sim.DefaultOptions()
	if f := c.String("config"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return o, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&o); err != nil && err != io.EOF {
			return o, usagef("docs/SIM.md lists the options", "%s: %v", f, err)
		}
	}
	set := func(name string, apply func()) {
		if c.IsSet(name) || c.String("config") == "" {
			apply()
		}
	}
	set("seed", func() { o.Seed = c.Uint64("seed") })
	set("providers", func() { o.Supply.Providers = c.Int("providers") })
	set("renters", func() { o.Demand.Renters = c.Int("renters") })
	set("days", func() { o.Days = c.Float64("days") })
	set("load", func() { o.Demand.Load = c.Float64("load") })
	set("supply", func() { o.SupplyFile = c.String("supply") })
	set("demand", func() { o.DemandFile = c.String("demand") })
	set("demand-trace", func() { o.DemandTrace = c.String("demand-trace") })
	set("gang-width", func() { o.Demand.GangWidth = c.Int("gang-width") })
	set("array-split", func() { o.Demand.ArraySplit = c.Int("array-split") })
	set("array-parallel", func() { o.Demand.ArrayParallel = c.Int("array-parallel") })
	set("availability", func() { o.Supply.Availability = c.String("availability") })
	set("latency", func() { o.Market.Network.Latency = durationOf(c, "latency") })
	set("loss", func() { o.Market.Network.Loss = c.Float64("loss") })
	set("traces", func() { o.TracesDir = c.String("traces") })
	if c.IsSet("baselines") {
		o.Baselines = strings.Split(c.String("baselines"), ",")
	}
	if c.IsSet("adversaries") {
		if err := parseAdversaries(c.String("adversaries"), &o); err != nil {
			return o, err
		}
	}
	if err := simFinite(o); err != nil {
		return o, err
	}
	switch {
	case o.SupplyFile == "" && (o.Supply.Providers < 1 || o.Supply.Providers > 200_000):
		return o, usagef("for example: gleaner sim --providers 1000", "--providers %d: use 1 to 200000", o.Supply.Providers)
	case o.Demand.Renters < 1 || o.Demand.Renters > 100_000:
		return o, usagef("for example: gleaner sim --renters 100", "--renters %d: use 1 to 100000", o.Demand.Renters)
	case o.Demand.GangWidth < 0 || o.Demand.GangWidth > 8:
		return o, usagef("for example: gleaner sim --gang-width 2", "--gang-width %d: use 0 (no gangs) to 8", o.Demand.GangWidth)
	case o.Demand.ArraySplit < 0 || o.Demand.ArraySplit == 1 || o.Demand.ArraySplit > sim.MaxArraySplit:
		return o, usagef("for example: gleaner sim --array-split 8", "--array-split %d: use 0 (no arrays) or 2 to %d", o.Demand.ArraySplit, sim.MaxArraySplit)
	case o.Demand.ArrayParallel < 0 || o.Demand.ArrayParallel > max(o.Demand.ArraySplit, 0):
		return o, usagef("for example: gleaner sim --array-split 8 --array-parallel 4", "--array-parallel %d: use 0 (every shard at once) to --array-split", o.Demand.ArrayParallel)
	case o.Days <= 0 || o.Days > 366:
		return o, usagef("for example: gleaner sim --days 7", "--days %v: use more than 0 and at most 366", o.Days)
	case o.Demand.Load <= 0 || o.Demand.Load > 10:
		return o, usagef("for example: gleaner sim --load 0.8", "--load %v: use more than 0 and at most 10", o.Demand.Load)
	case o.Market.Network.Loss < 0 || o.Market.Network.Loss >= 1:
		return o, usagef("for example: gleaner sim --loss 0.01", "--loss %v: use 0 up to (not including) 1", o.Market.Network.Loss)
	case o.Market.Network.Latency < 0 || o.Market.Network.Latency > 10*time.Second:
		return o, usagef("for example: gleaner sim --latency 40ms", "--latency %v: use 0 to 10s", o.Market.Network.Latency)
	}
	if err := o.Market.Validate(); err != nil {
		return o, usagef("docs/SIM.md lists the options", "%v", err)
	}
	for _, b := range o.Baselines {
		if !slices.Contains(sim.BaselineNames(), b) {
			return o, usagef("one of "+strings.Join(sim.BaselineNames(), ", "), "--baselines: unknown baseline %q", b)
		}
	}
	return o, nil
}

// simFinite refuses NaN and ±Inf in every float option, from a flag or
// the config file (whose YAML key is named where no flag sets it).
func simFinite(o sim.Options) error {
	hint := "docs/SIM.md lists the options"
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"--days", o.Days}, {"--load", o.Demand.Load}, {"--loss", o.Market.Network.Loss},
		{"demand.nonpayershare", o.Demand.NonPayerShare}, {"supply.pricenoise", o.Supply.PriceNoise},
		{"market.verifyshare", o.Market.VerifyShare},
	} {
		if err := finite(f.name, f.v, hint); err != nil {
			return err
		}
	}
	for b, share := range o.Supply.AdversaryShare {
		if err := finite(fmt.Sprintf("supply.adversaryshare.%s", b), share, hint); err != nil {
			return err
		}
	}
	return nil
}

// parseAdversaries reads "skip=0.05,nonpayer=0.1": provider behaviours
// go to the supply, nonpayer to the demand.
func parseAdversaries(s string, o *sim.Options) error {
	hint := "for example: --adversaries skip=0.05,fake=0.05,abandon=0.05,refuse=0.05,nonpayer=0.1"
	o.Supply.AdversaryShare = map[sim.Behaviour]float64{}
	total := 0.0
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		share, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || math.IsNaN(share) || share < 0 || share > 1 {
			return usagef(hint, "--adversaries %q: want behaviour=share with a share from 0 to 1", part)
		}
		switch b := sim.Behaviour(k); b {
		case sim.Skip, sim.Fake, sim.Abandon, sim.Refuse:
			o.Supply.AdversaryShare[b] = share
			total += share
		case sim.NonPayer:
			o.Demand.NonPayerShare = share
		default:
			return usagef(hint, "--adversaries: unknown behaviour %q (skip, fake, abandon, refuse or nonpayer)", k)
		}
	}
	if total > 1 {
		return usagef(hint, "--adversaries: provider shares add up to %v, more than 1", total)
	}
	return nil
}
