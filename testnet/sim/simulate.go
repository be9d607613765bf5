package sim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Options is one `gleaner sim` run: where supply and demand come from,
// how the market and the baselines are configured. Every field has a
// YAML name (a --config file) and most a flag; docs/SIM.md lists them.
type Options struct {
	Seed      uint64  `yaml:"seed" json:"seed"`
	Days      float64 `yaml:"days" json:"days"`
	TracesDir string  `yaml:"traces" json:"traces"`
	// SupplyFile, if set, is a canonical supply CSV used instead of
	// drawing supply from the traces (Supply then only sets nothing).
	SupplyFile string `yaml:"supply_file" json:"supply_file,omitempty"`
	// DemandFile, if set, is a canonical demand CSV used as it is;
	// otherwise DemandTrace is converted and sampled to Demand.Load.
	DemandFile  string `yaml:"demand_file" json:"demand_file,omitempty"`
	DemandTrace string `yaml:"demand_trace" json:"demand_trace,omitempty"` // alibaba-v2023 (default) or alibaba-v2025
	// Baselines names the central baselines to run beside the market;
	// empty runs all of them.
	Baselines []string        `yaml:"baselines" json:"baselines"`
	BoundSlot int64           `yaml:"bound_slot_s" json:"bound_slot_s"`
	Supply    SupplyConfig    `yaml:"supply" json:"supply"`
	Demand    DemandConfig    `yaml:"demand" json:"demand"`
	Market    Config          `yaml:"market" json:"market"`
	Baseline  BaselineOptions `yaml:"baseline" json:"baseline"`
}

// DefaultOptions: 200 providers and 100 renters for a week on the
// Alibaba traces, the market as node runs it, every baseline.
func DefaultOptions() Options {
	return Options{Seed: 1, Days: 7, TracesDir: defaultTraceDir, DemandTrace: TraceAlibaba2023, BoundSlot: 3600,
		Supply: DefaultSupplyConfig(), Demand: DefaultDemandConfig(), Market: DefaultConfig()}
}

// Demand traces a run can convert and sample.
const (
	TraceAlibaba2023 = "alibaba-v2023"
	TraceAlibaba2025 = "alibaba-v2025"
)

// Result is a finished run: the report (deterministic for the options)
// and the wall-clock timing (which is not).
type Result struct {
	Report *Report
	Series Series
	Timing Timing
	Stats  MarketStats
	Supply *Supply
	Demand *Demand
	// Ran is the options as the run used them, the report's
	// configuration block: see Options.ran.
	Ran Options
}

// Timing is how long each part of a run took on this machine.
type Timing struct {
	Providers   int     `json:"providers"`
	Jobs        int     `json:"jobs"`
	SimDays     float64 `json:"sim_days"`
	MarketSec   float64 `json:"market_s"`
	BaselineSec float64 `json:"baselines_s"`
	BoundSec    float64 `json:"bound_s"`
	TotalSec    float64 `json:"total_s"`
	// SimSecondsPerSecond is the market's speed: virtual seconds per
	// wall second.
	SimSecondsPerSecond float64 `json:"sim_seconds_per_second"`
}

// Step is what a run reports while it works: which part, and the
// market's progress through virtual time.
type Step struct {
	Part   string // "supply", "demand", "market", a baseline's name, "bound", "report"
	Market Progress
}

// Interrupted is SimulateContext's error when its context ends the run
// first: the part that was running and the context's cause. Nothing of
// the run is kept.
type Interrupted struct {
	Step  Step
	Cause error
}

func (e *Interrupted) Error() string {
	return fmt.Sprintf("interrupted during %s: %v", e.Step.Part, e.Cause)
}

func (e *Interrupted) Unwrap() error { return e.Cause }

// Simulate runs o to the end: SimulateContext with a context that never
// ends.
func Simulate(o Options, step func(Step)) (*Result, error) {
	return SimulateContext(context.Background(), o, step)
}

// SimulateContext runs o: it loads or draws supply and demand, checks
// every job against them, runs the market and the baselines on them,
// computes the bound and its check against the exact optimum, and builds
// the report. When ctx ends first it returns an *Interrupted at once,
// without waiting for the part running to reach a stopping point, and
// step is not called again. The run is abandoned in the background: a
// baseline or the bound stops when it ends, the market at its next
// simulated hour, its sleeping coroutines left parked for good (RunMarket
// takes no context), so a program that goes on after an interruption
// does not get that memory back; `gleaner sim` exits.
func SimulateContext(ctx context.Context, o Options, step func(Step)) (*Result, error) {
	if step == nil {
		step = func(Step) {}
	}
	if ctx.Done() == nil {
		return simulate(ctx, o, step)
	}
	var mu sync.Mutex
	var at Step
	report := func(s Step) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		at = s
		step(s)
	}
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(abandoned); !ok {
					panic(r)
				}
				done <- outcome{nil, context.Cause(ctx)}
			}
		}()
		res, err := simulate(ctx, o, report)
		done <- outcome{res, err}
	}()
	select {
	case out := <-done:
		if ctx.Err() != nil {
			break
		}
		return out.res, out.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	return nil, &Interrupted{Step: at, Cause: context.Cause(ctx)}
}

// abandoned unwinds the market's run from its progress callback once
// the run's context has ended: RunMarket has no context of its own.
type abandoned struct{}

func simulate(ctx context.Context, o Options, step func(Step)) (*Result, error) {
	t0 := time.Now()
	if o.Days <= 0 || o.Days > 366 {
		return nil, fmt.Errorf("days: want more than 0 and at most 366, got %v", o.Days)
	}
	horizon := int64(o.Days * 86400)
	step(Step{Part: "supply"})
	s, err := o.loadSupply()
	if err != nil {
		return nil, err
	}
	step(Step{Part: "demand"})
	d, rows, err := o.loadDemandRows(s)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mc := o.Market
	mc.Seed = o.Seed
	tm := time.Now()
	market, stats, err := RunMarket(mc, s, d, horizon, func(p Progress) {
		if ctx.Err() != nil {
			panic(abandoned{})
		}
		step(Step{Part: "market", Market: p})
	})
	if err != nil {
		return nil, fmt.Errorf("market: %w", err)
	}
	timing := Timing{Providers: len(s.Providers), Jobs: len(d.Jobs), SimDays: o.Days, MarketSec: time.Since(tm).Seconds()}
	strategies := []Strategy{market}
	names := o.Baselines
	if len(names) == 0 {
		names = BaselineNames()
	}
	tb := time.Now()
	bo := o.Baseline
	bo.Seed, bo.Horizon = o.Seed, horizon
	bo.Retry, bo.Patience = int64(mc.Retry/time.Second), int64(mc.Patience/time.Second)
	bo.CheckpointSec, bo.Notice = int64(mc.Checkpoint/time.Second), int64(mc.Notice/time.Second)
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		step(Step{Part: n})
		st, err := RunBaseline(n, s, d, bo)
		if err != nil {
			return nil, err
		}
		strategies = append(strategies, st)
	}
	timing.BaselineSec = time.Since(tb).Seconds()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	step(Step{Part: "bound"})
	tbd := time.Now()
	slot := o.BoundSlot
	if slot <= 0 {
		slot = 3600
	}
	bound := UpperBound(s, d, horizon, slot)
	check := exactCheck(s, d, o.Seed, slot)
	timing.BoundSec = time.Since(tbd).Seconds()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	step(Step{Part: "report"})
	for _, st := range strategies {
		if err := CheckConservation(s, d, st, horizon); err != nil {
			return nil, fmt.Errorf("conservation: %w", err)
		}
	}
	ran := o.ran(s, d, rows, names, mc, bo, slot)
	r := NewReport(ran, o.Seed, s, d, strategies, bound.GPUSeconds, slot, horizon)
	r.Bound.ExactCheck = check
	for i := range r.Strategies {
		r.Strategies[i].About = AboutStrategy(r.Strategies[i].Name, bo.HubFeeBP)
	}
	addDemandNotes(r, ran, rows, d, horizon)
	addMarketNotes(r, stats, len(d.Jobs))
	series := ComputeSeries(s, d, strategies, horizon)
	timing.TotalSec = time.Since(t0).Seconds()
	if timing.MarketSec > 0 {
		timing.SimSecondsPerSecond = float64(horizon) / timing.MarketSec
	}
	return &Result{Report: r, Series: series, Timing: timing, Stats: stats, Supply: s, Demand: d, Ran: ran}, nil
}

func (o Options) loadSupply() (*Supply, error) {
	if o.SupplyFile != "" {
		od, err := OnDemandPrices(o.TracesDir)
		if err != nil {
			return nil, err
		}
		return LoadSupplyCSV(o.SupplyFile, od)
	}
	sc := o.Supply
	sc.Seed, sc.Days, sc.TracesDir = o.Seed, o.Days, o.TracesDir
	return BuildSupply(sc)
}

func (o Options) loadDemand(s *Supply) (*Demand, error) {
	d, _, err := o.loadDemandRows(s)
	return d, err
}

// loadDemandRows reads the demand CSV (and says where each job came
// from) or samples the trace, and checks every job against s
// (CheckDemand): a CSV's before its open max prices and gold starts are
// resolved, so that a row that cannot be resolved is named too. A CSV
// without a renter column has its jobs dealt over demand.renters; one
// with it keeps its renters.
func (o Options) loadDemandRows(s *Supply) (*Demand, *demandRows, error) {
	dc := o.Demand
	dc.Seed, dc.Days = o.Seed, o.Days
	if dc.GangWidth < 0 || dc.GangWidth > auction.MaxGangMembers {
		return nil, nil, fmt.Errorf("demand.gangwidth %d: use 0 (no gangs) to %d GPUs", dc.GangWidth, auction.MaxGangMembers)
	}
	if dc.ArraySplit < 0 || dc.ArraySplit == 1 || dc.ArraySplit > MaxArraySplit || dc.ArrayParallel < 0 || dc.ArrayParallel > max(dc.ArraySplit, 0) {
		return nil, nil, fmt.Errorf("demand.arraysplit %d, arrayparallel %d: use arraysplit 0 (no arrays) or 2..%d, arrayparallel 0 (every shard at once) to arraysplit",
			dc.ArraySplit, dc.ArrayParallel, MaxArraySplit)
	}
	if o.DemandFile != "" {
		d, rows, err := loadDemandCSV(o.DemandFile)
		if err != nil {
			return nil, nil, err
		}
		d = gangsOf(d, dc.GangWidth, s)
		d, _ = ArraysLongerThan(d, dc.ArraySplit, dc.ArrayParallel, ArraySplitOver)
		if err := checkDemand(s, d, rows); err != nil {
			return nil, nil, err
		}
		if !rows.renterColumn {
			if err := dc.defaults(); err != nil {
				return nil, nil, err
			}
			DealRenters(d, dc.Renters)
		}
		if err := ResolveDemand(d, s, dc); err != nil {
			return nil, nil, err
		}
		d, from := ExpandArrays(d)
		lines := make([]int, len(from))
		for k, i := range from {
			lines[k] = rows.lines[i]
		}
		rows.lines = lines
		return d, rows, nil
	}
	var base *Demand
	var err error
	dir, err := TraceDir(o.TracesDir)
	if err != nil {
		return nil, nil, err
	}
	switch o.DemandTrace {
	case "", TraceAlibaba2023:
		base, err = ConvertAlibaba2023(filepath.Join(dir, "alibaba_v2023_openb_pod_list_default.csv"), ConvertOptions{Seed: o.Seed})
	case TraceAlibaba2025:
		base, err = ConvertAlibaba2025(filepath.Join(dir, "alibaba_v2025_disaggregated_DLRM_trace.csv"), ConvertOptions{Seed: o.Seed})
	default:
		return nil, nil, fmt.Errorf("demand trace %q: want %s or %s, or a demand CSV (--demand)", o.DemandTrace, TraceAlibaba2023, TraceAlibaba2025)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(base.Jobs) == 0 {
		return nil, nil, errors.New("the demand trace has no usable jobs")
	}
	d, err := SampleDemand(base, s, dc)
	if err != nil {
		return nil, nil, err
	}
	d = gangsOf(d, dc.GangWidth, s)
	d, _ = ArraysLongerThan(d, dc.ArraySplit, dc.ArrayParallel, ArraySplitOver)
	if err := checkDemand(s, d, nil); err != nil {
		return nil, nil, err
	}
	d, _ = ExpandArrays(d)
	return d, nil, nil
}

// gangsOf is d with its jobs wider than width run as gangs (width 0:
// d as it is), the count named in its sources. A job whose gang s could
// never hold (fewer distinct providers with its models, region and a
// member's GPUs than members) stays whole, as a renter would submit it,
// so that the option never makes a run fail its demand check; a gang
// the demand CSV names itself is checked as it is.
func gangsOf(d *Demand, width int, s *Supply) *Demand {
	if width <= 0 {
		return d
	}
	g, n := GangsWiderThan(d, width)
	kept := 0
	reach := map[string]modelReach{}
	for i := range g.Jobs {
		j := &g.Jobs[i]
		if !j.Gang() || d.Jobs[i].Gang() {
			continue
		}
		key := strings.Join(j.Models, "|") + "@" + j.Region
		r, ok := reach[key]
		if !ok {
			r = reachOf(s, j.Models, j.Region)
			reach[key] = r
		}
		if r.atLeast[j.GPUs] < j.Members {
			g.Jobs[i] = d.Jobs[i]
			n--
			kept++
		}
	}
	g.Sources = append(slices.Clone(d.Sources), fmt.Sprintf("gangs: %d silver and bronze jobs wider than %d GPUs run as gangs (demand.gangwidth); %d kept whole, too few distinct providers for their members", n, width, kept))
	return g
}

// ran is o as the run used it, the report's configuration block: what
// the options set but the run did not use is cleared, and so left out
// (a demand CSV's run shows no trace, load or duration cap; a supply
// CSV's no drawing parameters), and what the run decided is filled in
// (the renters that submit jobs and what decided them, the baselines
// run and their settings, the market's seed).
func (o Options) ran(s *Supply, d *Demand, rows *demandRows, names []string, mc Config, bo BaselineOptions, slot int64) Options {
	r := o
	r.Baselines, r.Market, r.Baseline, r.BoundSlot = names, mc, bo.withDefaults(), slot
	if o.SupplyFile != "" {
		r.Supply = SupplyConfig{Providers: len(s.Providers)}
	} else {
		sc := o.Supply
		sc.Seed, sc.Days, sc.TracesDir = o.Seed, o.Days, o.TracesDir
		_ = sc.defaults() // BuildSupply took them
		r.Supply = sc
	}
	dc := o.Demand
	dc.Seed, dc.Days = o.Seed, o.Days
	_ = dc.defaults() // SampleDemand or ResolveDemand took them
	switch {
	case o.DemandFile == "":
		dc.RentersFrom = RentersDrawn
	case rows.renterColumn:
		r.DemandTrace, dc.Load, dc.MaxDuration = "", 0, 0
		dc.Renters, dc.RentersFrom = len(d.Renters), RentersColumn
	default:
		r.DemandTrace, dc.Load, dc.MaxDuration = "", 0, 0
		dc.Renters, dc.RentersFrom = len(d.Renters), RentersDealt
	}
	r.Demand = dc
	return r
}

// addDemandNotes says in words what the configuration block records in
// codes: what decided each job's renter, and how many jobs the horizon
// left out.
func addDemandNotes(r *Report, ran Options, rows *demandRows, d *Demand, horizon int64) {
	switch ran.Demand.RentersFrom {
	case RentersColumn:
		r.Notes = append(r.Notes, fmt.Sprintf("Renters: the renter column of %s decided each job's renter (%d renters submit jobs); demand.renters (--renters) was not used.",
			rows.name, renterCount(d)))
	case RentersDealt:
		r.Notes = append(r.Notes, fmt.Sprintf("Renters: %s has no renter column, so its jobs were dealt in turn, in submit order, over %d renters (demand.renters, --renters %d).",
			rows.name, len(d.Renters), ran.Demand.Renters))
	}
	late := 0
	for _, j := range d.Jobs {
		if j.Submit >= horizon {
			late++
		}
	}
	if late > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d of the %d jobs are submitted after the run's %.4g days and never ran: they count as jobs that did not complete.",
			late, len(d.Jobs), ran.Days))
	}
	for _, pr := range r.Demand.PriceReach {
		if pr.PricedOut > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("Max prices: %d of the %d %s jobs are priced out of every provider that could serve them: their max price is under every such provider's %s floor.",
				pr.PricedOut, pr.Jobs, pr.Tier, pr.Tier))
		}
	}
}

// addMarketNotes puts the market's own counters in the report.
func addMarketNotes(r *Report, st MarketStats, jobs int) {
	r.Notes = append(r.Notes,
		fmt.Sprintf("Market: %d auction rounds for %d jobs (%.1f per job), %d quotes declined as fully utilised, %d starts refused, %d leases stopped unpaid, %d ratings, %d reputation passes.",
			st.Rounds, jobs, float64(st.Rounds)/float64(max(jobs, 1)), st.QuotesBusy, st.StartFailed, st.UnpaidStops, st.Ratings, st.ReputationPasses),
		fmt.Sprintf("Gossip: the busiest node (a renter subscribed to every offer shard) received %.1f KB/s; the gossip goal is judged on the average over all nodes.",
			st.BusiestNodeGossip/1000))
	if st.WinningBids > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("Clearing: %s. Winners could have asked %.1f%% more than their bids on average and still won (the second-score price over the winning bid): "+
			"the second-score rule pays them that whatever they ask; pay-as-bid pays their bid, so a provider gains by asking up to it.",
			st.Clearing, 100*float64(st.SecondScores-st.WinningBids)/float64(st.WinningBids)))
	}
}
