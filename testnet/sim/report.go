package sim

import (
	"encoding/json"
	"io"
	"slices"

	"github.com/gleaner-net/gleaner/auction"
)

// ReportVersion is the report's schema version; bump it when a field
// changes meaning.
//
// Version 2: goals have a status, and one with nothing to test is "not
// tested", no longer met; the configuration is what ran, under the YAML
// keys; JCT means and censored JCTs, the demand's price reach and each
// strategy's description were added.
const ReportVersion = 2

// Report is everything a simulator run measured, in a form that is the
// same bytes for the same inputs: no wall-clock values (the caller keeps
// speed apart), slices in a fixed order, no maps.
type Report struct {
	Version    int              `json:"version"`
	Seed       uint64           `json:"seed"`
	Config     any              `json:"config"` // the run's configuration, as the caller gave it
	Supply     SupplySummary    `json:"supply"`
	Demand     DemandSummary    `json:"demand"`
	Bound      BoundSummary     `json:"bound"`
	Strategies []StrategyReport `json:"strategies"`
	Goals      []Goal           `json:"goals"`
	Notes      []string         `json:"notes"`
}

// SupplySummary describes the (simulated) providers.
type SupplySummary struct {
	Providers       int          `json:"providers"`
	GPUs            int          `json:"gpus"`
	Models          []ModelCount `json:"models"` // by model name
	Behaviours      []NameCount  `json:"behaviours"`
	OfferedGPUHours float64      `json:"offered_gpu_hours"`
	Sources         []string     `json:"sources"`
}

// ModelCount is the providers and GPUs of one model and its on-demand
// price per GPU-hour.
type ModelCount struct {
	Model     string          `json:"model"`
	Providers int             `json:"providers"`
	GPUs      int             `json:"gpus"`
	OnDemand  auction.Credits `json:"on_demand"`
}

// NameCount is how many of something, and their GPU-hours where that
// means anything.
type NameCount struct {
	Name     string  `json:"name"`
	Count    int     `json:"count"`
	GPUHours float64 `json:"gpu_hours,omitempty"`
}

// DemandSummary describes the jobs.
type DemandSummary struct {
	Jobs             int         `json:"jobs"`
	Renters          int         `json:"renters"`
	Tiers            []NameCount `json:"tiers"` // gold, silver, bronze, then others
	Kinds            []NameCount `json:"kinds"` // by name
	RenterBehaviours []NameCount `json:"renter_behaviours"`
	DemandedGPUHours float64     `json:"demanded_gpu_hours"`
	// PriceReach is, per tier, how much of the supply the jobs' max
	// prices leave out (report_reach.go).
	PriceReach []TierPriceReach `json:"price_reach"`
	Sources    []string         `json:"sources"`
}

// BoundSummary is the upper bound on GPU-hours any schedule could fill.
type BoundSummary struct {
	GPUSeconds int64   `json:"gpu_seconds"`
	GPUHours   float64 `json:"gpu_hours"`
	SlotSec    int64   `json:"slot_sec"`
	ExactCheck string  `json:"exact_check"` // filled in by the caller
}

// StrategyReport is one strategy's metrics, adversary table and traffic.
type StrategyReport struct {
	Name string `json:"name"`
	// About says what the strategy is, what it knows and what it pays.
	About       StrategyAbout  `json:"about"`
	Metrics     Metrics        `json:"metrics"`
	Adversaries []AdversaryRow `json:"adversaries"`
	Traffic     TrafficCounts  `json:"traffic"`
}

// TrafficCounts is a strategy's Traffic under snake_case JSON names.
type TrafficCounts struct {
	Messages    int64 `json:"messages"`
	Bytes       int64 `json:"bytes"`
	GossipBytes int64 `json:"gossip_bytes"`
}

// NewReport measures every strategy on the same supply and demand over
// [0, horizon) beside the bound (GPU-seconds, computed on slots of slot
// seconds) and evaluates the goals.
func NewReport(config any, seed uint64, s *Supply, d *Demand, strategies []Strategy, bound, slot, horizon int64) *Report {
	r := &Report{
		Version: ReportVersion,
		Seed:    seed,
		Config:  config,
		Supply:  summariseSupply(s, horizon),
		Demand:  summariseDemand(d, s, horizon),
		Bound:   BoundSummary{GPUSeconds: bound, GPUHours: gpuHours(bound), SlotSec: slot},
		Notes: []string{
			"Simulated market: the supply's GPUs are simulated machines drawn from traces, not real hardware.",
			"Money is in credits, 1 credit taken as 1 USD: totals in credits, prices and income in credits per GPU-hour (credits/GPU-h); JSON amounts named paid, on_demand or on_demand_cost are millionths of a credit, other JSON money figures are credits.",
			"Percentiles are nearest-rank: the p-th of n sorted values is the one at rank ceil(p*n/100).",
			"Shares are fractions in [0, 1], and 0 where there was nothing to divide by.",
		},
	}
	for _, st := range strategies {
		r.Strategies = append(r.Strategies, StrategyReport{
			Name:        st.Name,
			About:       AboutStrategy(st.Name, 0),
			Metrics:     ComputeMetrics(s, d, st, horizon, bound),
			Adversaries: AdversaryTable(s, d, st, horizon),
			Traffic:     TrafficCounts(st.Messages),
		})
	}
	r.Goals = EvaluateGoals(r.Strategies)
	return r
}

// AddGoal appends a goal the caller measured itself, such as the
// simulator's speed (kept out of NewReport so the report stays free of
// wall-clock values unless the caller chooses otherwise).
func (r *Report) AddGoal(g Goal) { r.Goals = append(r.Goals, g) }

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func summariseSupply(s *Supply, horizon int64) SupplySummary {
	out := SupplySummary{Providers: len(s.Providers), Sources: slices.Clone(s.Sources)}
	models := map[string]*ModelCount{}
	behaviours := map[string]int{}
	for _, p := range s.Providers {
		out.GPUs += p.GPUs
		m := models[p.Model]
		if m == nil {
			m = &ModelCount{Model: p.Model, OnDemand: s.OnDemand[p.Model]}
			models[p.Model] = m
		}
		m.Providers++
		m.GPUs += p.GPUs
		behaviours[behaviourName(p.Behaviour)]++
	}
	for _, name := range reportSortedKeys(models) {
		out.Models = append(out.Models, *models[name])
	}
	out.Behaviours = countsByName(behaviours, nil)
	for _, o := range offeredSeconds(s, horizon) {
		out.OfferedGPUHours += gpuHours(o)
	}
	return out
}

func summariseDemand(d *Demand, s *Supply, horizon int64) DemandSummary {
	out := DemandSummary{Jobs: len(d.Jobs), Renters: renterCount(d), Sources: slices.Clone(d.Sources),
		PriceReach: PriceReach(s, d, horizon)}
	tiers := map[string]int{}
	tierHours := map[string]float64{}
	kinds := map[string]int{}
	kindHours := map[string]float64{}
	for _, j := range d.Jobs {
		h := gpuHours(j.Work())
		out.DemandedGPUHours += h
		tiers[string(j.Tier)]++
		tierHours[string(j.Tier)] += h
		kinds[j.Kind]++
		kindHours[j.Kind] += h
	}
	out.Tiers = countsByName(tiers, tierHours)
	// Tiers read best gold, silver, bronze; anything else after them.
	slices.SortStableFunc(out.Tiers, func(a, b NameCount) int {
		return tierRank(a.Name) - tierRank(b.Name)
	})
	out.Kinds = countsByName(kinds, kindHours)
	renters := map[string]int{}
	for i := range out.Renters {
		b := Honest
		if i < len(d.Renters) {
			b = d.Renters[i]
		}
		renters[behaviourName(b)]++
	}
	out.RenterBehaviours = countsByName(renters, nil)
	return out
}

// countsByName turns counts (and GPU-hours, if given) into a list sorted
// by name.
func countsByName(counts map[string]int, hours map[string]float64) []NameCount {
	var out []NameCount
	for _, name := range reportSortedKeys(counts) {
		out = append(out, NameCount{Name: name, Count: counts[name], GPUHours: hours[name]})
	}
	return out
}

// tierRank orders tier names gold, silver, bronze, then any other.
func tierRank(name string) int {
	if slot := tierSlot(auction.Tier(name)); slot > 0 {
		return slot
	}
	return len(reportTiers)
}

func reportSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
