package sim

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"
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
	DemandTrace string `yaml:"demand_trace" json:"demand_trace"` // alibaba-v2023 (default) or alibaba-v2025
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

// Simulate runs o: it loads or draws supply and demand, checks that they
// can meet at all, runs the market and the baselines on them, computes
// the bound and its check against the exact optimum, and builds the report.
func Simulate(o Options, step func(Step)) (*Result, error) {
	if step == nil {
		step = func(Step) {}
	}
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
	d, err := o.loadDemand(s)
	if err != nil {
		return nil, err
	}
	if err := CheckFeasible(s, d); err != nil {
		return nil, fmt.Errorf("this supply cannot serve this demand:\n%w", err)
	}
	mc := o.Market
	mc.Seed = o.Seed
	tm := time.Now()
	market, stats, err := RunMarket(mc, s, d, horizon, func(p Progress) { step(Step{Part: "market", Market: p}) })
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
		step(Step{Part: n})
		st, err := RunBaseline(n, s, d, bo)
		if err != nil {
			return nil, err
		}
		strategies = append(strategies, st)
	}
	timing.BaselineSec = time.Since(tb).Seconds()
	step(Step{Part: "bound"})
	tbd := time.Now()
	slot := o.BoundSlot
	if slot <= 0 {
		slot = 3600
	}
	bound := UpperBound(s, d, horizon, slot)
	check := exactCheck(s, d, o.Seed, slot)
	timing.BoundSec = time.Since(tbd).Seconds()
	step(Step{Part: "report"})
	for _, st := range strategies {
		if err := CheckConservation(s, d, st, horizon); err != nil {
			return nil, fmt.Errorf("conservation: %w", err)
		}
	}
	r := NewReport(o, o.Seed, s, d, strategies, bound.GPUSeconds, slot, horizon)
	r.Bound.ExactCheck = check
	addMarketNotes(r, stats, len(d.Jobs))
	series := ComputeSeries(s, d, strategies, horizon)
	timing.TotalSec = time.Since(t0).Seconds()
	if timing.MarketSec > 0 {
		timing.SimSecondsPerSecond = float64(horizon) / timing.MarketSec
	}
	return &Result{Report: r, Series: series, Timing: timing, Stats: stats, Supply: s, Demand: d}, nil
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
	dc := o.Demand
	dc.Seed, dc.Days = o.Seed, o.Days
	if o.DemandFile != "" {
		d, err := LoadDemandCSV(o.DemandFile)
		if err != nil {
			return nil, err
		}
		return d, ResolveDemand(d, s, dc)
	}
	var base *Demand
	var err error
	dir, err := TraceDir(o.TracesDir)
	if err != nil {
		return nil, err
	}
	switch o.DemandTrace {
	case "", TraceAlibaba2023:
		base, err = ConvertAlibaba2023(filepath.Join(dir, "alibaba_v2023_openb_pod_list_default.csv"), ConvertOptions{Seed: o.Seed})
	case TraceAlibaba2025:
		base, err = ConvertAlibaba2025(filepath.Join(dir, "alibaba_v2025_disaggregated_DLRM_trace.csv"), ConvertOptions{Seed: o.Seed})
	default:
		return nil, fmt.Errorf("demand trace %q: want %s or %s, or a demand CSV (--demand)", o.DemandTrace, TraceAlibaba2023, TraceAlibaba2025)
	}
	if err != nil {
		return nil, err
	}
	if len(base.Jobs) == 0 {
		return nil, errors.New("the demand trace has no usable jobs")
	}
	return SampleDemand(base, s, dc)
}

// addMarketNotes puts the market's own counters in the report.
func addMarketNotes(r *Report, st MarketStats, jobs int) {
	r.Notes = append(r.Notes,
		fmt.Sprintf("Market: %d auction rounds for %d jobs (%.1f per job), %d starts refused, %d leases stopped unpaid, %d ratings, %d reputation passes.",
			st.Rounds, jobs, float64(st.Rounds)/float64(max(jobs, 1)), st.StartFailed, st.UnpaidStops, st.Ratings, st.ReputationPasses),
		fmt.Sprintf("Gossip: the busiest node (a renter subscribed to every offer shard) received %.1f KB/s; the gossip goal is judged on the average over all nodes.",
			st.BusiestNodeGossip/1000))
}
