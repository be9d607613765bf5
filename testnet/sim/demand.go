package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

// DemandConfig says how SampleDemand draws a run's jobs from a converted
// trace, and how ResolveDemand fills what a demand CSV left open. The
// JSON names are the YAML keys (the report's configuration block); a
// field a run did not use is left out of it.
type DemandConfig struct {
	Days float64 `json:"days,omitempty"` // submits fall in [0, Days*86400)
	// Load is demanded GPU-hours over the supply's offered idle GPU-hours
	// in the horizon; default 0.8. Sampled demand only.
	Load float64 `json:"load,omitempty"`
	// Renters is how many renters submit the jobs: sampled demand draws
	// each job's renter among them; a demand CSV without a renter column
	// has its jobs dealt over them in turn (DealRenters); a CSV with one
	// names each job's renter itself, and Renters is not used. Default 100.
	Renters  int   `json:"renters"`
	GoldLead int64 `json:"goldlead"` // seconds from submit to a gold reservation's start; default 7200 (0 means the default)
	// MaxPriceOfOnDemandBP is a renter's max price per tier, for a job
	// whose max price is left open, as a share of the on-demand price of
	// the models that could serve it: the median over the supply's
	// offered GPU-hours on those providers (see resolveJobs). Defaults
	// gold 10000, silver 8000, bronze 5000 (a missing tier gets its
	// default).
	MaxPriceOfOnDemandBP map[auction.Tier]int64 `json:"maxpriceofondemandbp"`
	NonPayerShare        float64                `json:"nonpayershare"`         // share of renters that are NonPayer
	MaxDuration          int64                  `json:"maxduration,omitempty"` // cap on a sampled job's duration, seconds; default 86400
	Seed                 uint64                 `json:"seed"`
	// GangWidth, when above 0, runs every silver or bronze job wider than
	// that many GPUs as a gang (GangsWiderThan, issue 36), sampled or
	// read from a demand CSV, before the demand is checked; 0..8.
	GangWidth int `json:"gangwidth,omitempty"`
	// ArraySplit, when above 1, runs every silver or bronze batch job
	// longer than ArraySplitOver (an hour) as a job array of that many
	// shards (ArraysLongerThan, issue 36), at most ArrayParallel at once
	// (0: every shard), sampled or read from a demand CSV; 0 or 2..64.
	ArraySplit    int `json:"arraysplit,omitempty"`
	ArrayParallel int `json:"arrayparallel,omitempty"`
	// RentersFrom says, in the report, what decided each job's renter:
	// RentersDrawn, RentersDealt or RentersColumn. Not an option.
	RentersFrom string `yaml:"-" json:"renters_from,omitempty"`
}

// What decided each job's renter (DemandConfig.RentersFrom).
const (
	RentersDrawn  = "drawn"  // sampled demand: drawn uniformly among demand.renters
	RentersDealt  = "dealt"  // a demand CSV without a renter column: dealt in turn over demand.renters
	RentersColumn = "column" // a demand CSV's renter column; demand.renters not used
)

// DefaultDemandConfig is load 0.8 over 7 days from 100 honest renters.
func DefaultDemandConfig() DemandConfig {
	return DemandConfig{
		Days: 7, Load: 0.8, Renters: 100, GoldLead: 7200,
		MaxPriceOfOnDemandBP: map[auction.Tier]int64{auction.Gold: 10000, auction.Silver: 8000, auction.Bronze: 5000},
		MaxDuration:          86400, Seed: 1,
	}
}

func (c *DemandConfig) defaults() error {
	d := DefaultDemandConfig()
	if c.Days == 0 {
		c.Days = d.Days
	}
	if c.Load == 0 {
		c.Load = d.Load
	}
	if c.Renters == 0 {
		c.Renters = d.Renters
	}
	if c.GoldLead == 0 {
		c.GoldLead = d.GoldLead
	}
	if c.MaxDuration == 0 {
		c.MaxDuration = d.MaxDuration
	}
	bp := map[auction.Tier]int64{}
	for _, t := range []auction.Tier{auction.Gold, auction.Silver, auction.Bronze} {
		if bp[t] = c.MaxPriceOfOnDemandBP[t]; bp[t] == 0 {
			bp[t] = d.MaxPriceOfOnDemandBP[t]
		}
		if bp[t] < 0 || bp[t] > 1_000_000 {
			return fmt.Errorf("max price of on-demand for %s: %d bp, expected 1..1000000", t, bp[t])
		}
	}
	c.MaxPriceOfOnDemandBP = bp
	switch {
	case !(c.Days > 0) || c.Days > 3650:
		return fmt.Errorf("days %v: expected more than 0, at most 3650", c.Days)
	case !(c.Load > 0) || c.Load > 100:
		return fmt.Errorf("load %v: expected more than 0, at most 100", c.Load)
	case c.Renters < 1 || c.Renters > maxRenters:
		return fmt.Errorf("renters %d: expected 1..%d", c.Renters, maxRenters)
	case c.GoldLead < 0 || c.MaxDuration < 1:
		return fmt.Errorf("gold lead %d s, max duration %d s: expected lead >= 0 and duration >= 1", c.GoldLead, c.MaxDuration)
	case !(c.NonPayerShare >= 0 && c.NonPayerShare <= 1):
		return fmt.Errorf("non-payer share %v: expected 0..1", c.NonPayerShare)
	}
	return nil
}

// SampleDemand draws a run's jobs from base (a converted trace) with
// replacement, keeping each job's shape (duration capped at MaxDuration,
// GPUs, models, tier, kind, region), until the demanded GPU-hours come
// closest to Load × the GPU-hours s offers in the horizon. Submits are a
// homogeneous Poisson process over [0, Days) given that count, that is
// independent uniform instants, sorted: the traces' own arrival times
// belong to other clusters and spans, so their profile is not kept.
//
// The traces name Alibaba's models and s may not have them all: each
// job's acceptable models are cut to those some provider of s has, and a
// job left with none is dropped from the pool (counted in Sources); a job
// accepting any model stays as it is. What remains impossible (too many
// GPUs, a region nobody is in) is CheckFeasible's to report.
func SampleDemand(base *Demand, s *Supply, cfg DemandConfig) (*Demand, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, p := range s.Providers {
		have[p.Model] = true
	}
	var pool []Job
	dropped := 0
	for _, j := range base.Jobs {
		if len(j.Models) > 0 {
			var kept []string
			for _, m := range j.Models {
				if have[m] {
					kept = append(kept, m)
				}
			}
			if len(kept) == 0 {
				dropped++
				continue
			}
			j.Models = kept
		}
		pool = append(pool, j)
	}
	if len(pool) == 0 {
		return nil, fmt.Errorf("sample demand: none of the %d base jobs accepts a model the supply has", len(base.Jobs))
	}
	horizon := int64(cfg.Days * 86400)
	offered := float64(OfferedGPUSeconds(s, horizon))
	target := cfg.Load * offered
	rng := func(k uint64) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, k)) }
	rJobs, rSubmits, rRenters := rng(streamDemandJobs), rng(streamDemandSubmits), rng(streamDemandRenters)
	mix := newModelMix(s, horizon)
	rModels := rng(streamDemandModels)
	anyModel := 0
	var jobs []Job
	demanded := 0.0
	for demanded < target {
		j := pool[rJobs.IntN(len(pool))]
		j.Models = append([]string(nil), j.Models...)
		j.Duration = min(j.Duration, cfg.MaxDuration)
		w := float64(j.Work())
		if demanded+w > target && target-demanded < demanded+w-target {
			break // stopping short is closer to the target
		}
		if len(jobs) == maxDemandRows {
			return nil, fmt.Errorf("sample demand: more than %d jobs for load %v", maxDemandRows, cfg.Load)
		}
		j.Submit = int64(rSubmits.Float64() * float64(horizon))
		if len(j.Models) == 0 {
			// The trace does not say which card the task wanted. A
			// renter wants some card and prices its job by it, so the
			// job takes a model drawn from the supply's mix.
			if m := mix.draw(rModels, j.GPUs); m != "" {
				j.Models = []string{m}
				anyModel++
			}
		}
		jobs = append(jobs, j)
		demanded += w
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
	d := &Demand{Jobs: jobs, Renters: make([]Behaviour, cfg.Renters)}
	for i := range d.Jobs {
		j := &d.Jobs[i]
		j.ID, j.Renter, j.Start = fmt.Sprintf("j%06d", i), rRenters.IntN(cfg.Renters), 0
	}
	markNonPayers(d.Renters, cfg.NonPayerShare, rRenters)
	if err := resolveJobs(d, s, cfg); err != nil {
		return nil, err
	}
	ratio := 0.0
	if offered > 0 {
		ratio = demanded / offered
	}
	d.Sources = append(append([]string(nil), base.Sources...),
		fmt.Sprintf("demand: %d jobs drawn with replacement from %d (%d dropped: no model the supply has), "+
			"durations capped at %d s, uniform submits over %.4g days; load %.3f of %.0f offered GPU-hours; "+
			"%d renters, %d non-payers; %d jobs that accepted any model were given one drawn from the supply's offered GPU-hours by model; seed %d",
			len(jobs), len(base.Jobs), dropped, cfg.MaxDuration, cfg.Days, ratio, offered/3600,
			cfg.Renters, countBehaviour(d.Renters, NonPayer), anyModel, cfg.Seed))
	return d, nil
}

// ResolveDemand fills what a demand read from CSV left open: MaxPrice 0
// becomes the tier's share of the median on-demand price of the supply
// that could serve the job (resolveJobs),
// gold Start 0 becomes Submit + GoldLead, and Renters grows to cover every
// renter named, with NonPayerShare of them non-payers.
func ResolveDemand(d *Demand, s *Supply, cfg DemandConfig) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	n := len(d.Renters)
	for _, j := range d.Jobs {
		n = max(n, j.Renter+1)
	}
	d.Renters = append(d.Renters, make([]Behaviour, n-len(d.Renters))...)
	markNonPayers(d.Renters, cfg.NonPayerShare, rand.New(rand.NewPCG(cfg.Seed, streamDemandRenters)))
	if err := resolveJobs(d, s, cfg); err != nil {
		return err
	}
	d.Sources = append(d.Sources, fmt.Sprintf("demand: open max prices resolved at %v bp of the median on-demand price over the offered GPU-hours that could serve each job, gold lead %d s, %d renters, %d non-payers",
		cfg.MaxPriceOfOnDemandBP, cfg.GoldLead, len(d.Renters), countBehaviour(d.Renters, NonPayer)))
	return nil
}

// resolveJobs sets gold starts and max prices left at 0. A job's max
// price is its tier's share (MaxPriceOfOnDemandBP) of the on-demand price
// of what could serve it, taken as the median over the GPU-hours the
// supply offers on the providers that could (an acceptable model, enough
// GPUs, the job's region, its tier sold): a job that accepts any model
// is priced by the supply's mix, not by its cheapest card, which would
// price it out of every dearer one. With no such provider (CheckDemand
// then refuses the job), the cheapest acceptable model's price is used.
func resolveJobs(d *Demand, s *Supply, cfg DemandConfig) error {
	cheapestAny := auction.Credits(math.MaxInt64)
	for _, p := range s.Providers {
		if od, ok := s.OnDemand[p.Model]; ok {
			cheapestAny = min(cheapestAny, od)
		}
	}
	median := newMedianOnDemand(s, int64(cfg.Days*86400))
	for i := range d.Jobs {
		j := &d.Jobs[i]
		if j.Tier == auction.Gold && j.Start == 0 {
			j.Start = j.Submit + cfg.GoldLead
		}
		if j.MaxPrice > 0 {
			continue
		}
		od, ok := median.of(j)
		if !ok {
			od = cheapestAny
			if len(j.Models) > 0 {
				od = math.MaxInt64
				for _, m := range j.Models {
					if p, ok := s.OnDemand[m]; ok {
						od = min(od, p)
					}
				}
			}
		}
		if od == math.MaxInt64 {
			return fmt.Errorf("job %s: no on-demand price for models %q to resolve its max price by", j.ID, j.Models)
		}
		j.MaxPrice = max(1, od*auction.Credits(cfg.MaxPriceOfOnDemandBP[j.Tier])/10000)
	}
	return nil
}

// medianOnDemand is the weighted median on-demand price of the providers
// that could serve a job, memoised by what decides which those are.
type medianOnDemand struct {
	s       *Supply
	offered []int64 // GPU-seconds per provider inside the horizon
	memo    map[string]medianResult
}

type medianResult struct {
	price auction.Credits
	ok    bool
}

func newMedianOnDemand(s *Supply, horizon int64) *medianOnDemand {
	return &medianOnDemand{s: s, offered: offeredSeconds(s, horizon), memo: map[string]medianResult{}}
}

// of is the on-demand price at which half the offered GPU-hours of the
// providers that could serve j (price aside) are at or below, or false if
// none could. When none of them offers anything in the horizon, each
// counts once.
func (m *medianOnDemand) of(j *Job) (auction.Credits, bool) {
	key := fitKey(j)
	if r, ok := m.memo[key]; ok {
		return r.price, r.ok
	}
	type weighted struct {
		price  auction.Credits
		weight int64
	}
	var ws []weighted
	var total int64
	for i := range m.s.Providers {
		p := &m.s.Providers[i]
		od, priced := m.s.OnDemand[p.Model]
		if !priced || !servesBarPrice(p, j) {
			continue
		}
		ws = append(ws, weighted{od, m.offered[i]})
		total += m.offered[i]
	}
	if total == 0 {
		for k := range ws {
			ws[k].weight = 1
		}
		total = int64(len(ws))
	}
	var r medianResult
	if len(ws) > 0 {
		sort.SliceStable(ws, func(a, b int) bool { return ws[a].price < ws[b].price })
		var cum int64
		for _, w := range ws {
			if cum += w.weight; 2*cum >= total {
				r = medianResult{w.price, true}
				break
			}
		}
	}
	m.memo[key] = r
	return r.price, r.ok
}

// fitKey is what decides which providers could serve a job, price aside.
func fitKey(j *Job) string {
	return fmt.Sprintf("%s|%d|%s|%s", j.Tier, j.GPUs, j.Region, strings.Join(j.Models, "|"))
}

// servesBarPrice is ProviderServes without the price: p has the GPUs, an
// acceptable model, the job's region and sells its tier at all.
func servesBarPrice(p *Provider, j *Job) bool {
	if p.GPUs < j.GPUs || j.GPUs <= 0 || TierFloor(p.Floors, j.Tier) <= 0 || !regionServes(p, j.Region) {
		return false
	}
	return len(j.Models) == 0 || slices.Contains(j.Models, p.Model)
}

// DealRenters gives d's jobs to n renters in turn, in submit order (the
// file's order among equal submits): job k to renter k mod n. It is how
// demand.renters (--renters) applies to a demand CSV without a renter
// column. There are never more renters than jobs.
func DealRenters(d *Demand, n int) {
	n = max(1, min(n, len(d.Jobs)))
	for k := range d.Jobs {
		d.Jobs[k].Renter = k % n
	}
	d.Renters = make([]Behaviour, n)
}

// markNonPayers makes round(share × len) renters NonPayer, counting any
// already so, drawing among the others.
func markNonPayers(renters []Behaviour, share float64, r *rand.Rand) {
	want := int(math.Round(share*float64(len(renters)))) - countBehaviour(renters, NonPayer)
	for _, i := range r.Perm(len(renters)) {
		if want <= 0 {
			return
		}
		if renters[i] == Honest {
			renters[i] = NonPayer
			want--
		}
	}
}

func countBehaviour(bs []Behaviour, b Behaviour) int {
	n := 0
	for _, x := range bs {
		if x == b {
			n++
		}
	}
	return n
}

// OfferedGPUSeconds is the GPU-seconds s's providers offer in [0, horizon):
// each provider's GPUs times its windows' length inside the horizon.
func OfferedGPUSeconds(s *Supply, horizon int64) int64 {
	var total int64
	for _, p := range s.Providers {
		for _, w := range p.Windows {
			if l := min(w.End, horizon) - max(w.Start, 0); l > 0 {
				total += l * int64(p.GPUs)
			}
		}
	}
	return total
}

// modelMix is the supply's offered GPU-seconds by model, to draw a model
// for a job that accepts any in proportion to what is on offer.
type modelMix struct {
	models  []string
	weight  []float64 // offered GPU-seconds
	maxGPUs []int     // the largest provider of the model
}

func newModelMix(s *Supply, horizon int64) *modelMix {
	idx := map[string]int{}
	mix := &modelMix{}
	for i := range s.Providers {
		p := &s.Providers[i]
		k, ok := idx[p.Model]
		if !ok {
			k = len(mix.models)
			idx[p.Model] = k
			mix.models, mix.weight, mix.maxGPUs = append(mix.models, p.Model), append(mix.weight, 0), append(mix.maxGPUs, 0)
		}
		var secs int64
		for _, w := range p.Windows {
			secs += max(0, min(w.End, horizon)-max(w.Start, 0))
		}
		mix.weight[k] += float64(secs * int64(p.GPUs))
		mix.maxGPUs[k] = max(mix.maxGPUs[k], p.GPUs)
	}
	return mix
}

// draw picks a model with a provider of at least gpus GPUs, weighted by
// offer; "" if none has.
func (m *modelMix) draw(r *rand.Rand, gpus int) string {
	total := 0.0
	for k, w := range m.weight {
		if m.maxGPUs[k] >= gpus {
			total += w
		}
	}
	if total <= 0 {
		return ""
	}
	x := r.Float64() * total
	for k, w := range m.weight {
		if m.maxGPUs[k] < gpus {
			continue
		}
		if x < w {
			return m.models[k]
		}
		x -= w
	}
	return m.models[len(m.models)-1]
}
