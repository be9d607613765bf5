package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// exactCheck measures how tight the upper bound is: on small instances
// drawn from the run's own supply and demand (3 providers of one model,
// 10 of the jobs that accept it, re-timed into one day and lengthened
// to 2-10 h so that the day is oversubscribed), it compares the
// bound with the exact offline optimum (ExactOptimum) and says how
// close they came.
func exactCheck(s *Supply, d *Demand, seed uint64, slot int64) string {
	const instances, providers, jobs, horizon = 10, 3, 10, 86400
	byModel := map[string][]int{}
	for i, p := range s.Providers {
		byModel[p.Model] = append(byModel[p.Model], i)
	}
	var models []string
	for m, ps := range byModel {
		if len(ps) >= providers {
			models = append(models, m)
		}
	}
	slices.Sort(models)
	if len(models) == 0 || slot <= 0 || horizon/slot > 48 {
		return "not run: no model has 3 providers, or the slot is under 30 minutes"
	}
	r := rand.New(rand.NewPCG(seed, 77))
	var ratios []float64
	equal := 0
	for range instances {
		model := models[r.IntN(len(models))]
		small := &Supply{OnDemand: s.OnDemand}
		ps := byModel[model]
		for _, k := range r.Perm(len(ps))[:providers] {
			p := s.Providers[ps[k]]
			p.Behaviour = Honest
			p.Windows = clipSpans(p.Windows, 0, horizon)
			small.Providers = append(small.Providers, p)
		}
		sd := &Demand{}
		for _, k := range r.Perm(len(d.Jobs)) {
			j := d.Jobs[k]
			if len(sd.Jobs) == jobs || (len(j.Models) > 0 && !slices.Contains(j.Models, model)) {
				continue
			}
			j.Models, j.Region, j.Renter = []string{model}, "", 0
			j.GPUs = min(j.GPUs, small.Providers[0].GPUs)
			j.Submit = int64(r.IntN(horizon / 2))
			// Long enough that the day is oversubscribed and the choice matters.
			j.Duration = int64(2*3600 + r.IntN(8*3600))
			if j.Start != 0 {
				j.Start = j.Submit + 3600
			}
			sd.Jobs = append(sd.Jobs, j)
		}
		slices.SortStableFunc(sd.Jobs, func(a, b Job) int { return int(a.Submit - b.Submit) })
		sd.Renters = []Behaviour{Honest}
		exact, err := ExactOptimum(small, sd, horizon, slot)
		if err != nil {
			return "not run: " + err.Error()
		}
		bound := UpperBound(small, sd, horizon, slot).GPUSeconds
		if bound < exact {
			return fmt.Sprintf("FAILED: the bound (%d GPU-s) is below the exact optimum (%d GPU-s) on a small instance", bound, exact)
		}
		if bound == exact {
			equal++
		}
		if bound > 0 {
			ratios = append(ratios, float64(exact)/float64(bound))
		}
	}
	if len(ratios) == 0 {
		return "not run: the small instances had nothing to schedule"
	}
	var sum float64
	for _, x := range ratios {
		sum += x
	}
	return fmt.Sprintf("on %d small instances drawn from this run (3 providers of one model, 10 jobs of 2-10 h, one day, %d s slots) the exact optimum is %.0f%% of the bound on average (worst %.0f%%); they are equal on %d",
		instances, slot, 100*sum/float64(len(ratios)), 100*slices.Min(ratios), equal)
}

// clipSpans is spans cut to [from, to).
func clipSpans(spans []Span, from, to int64) []Span {
	var out []Span
	for _, s := range spans {
		if s.End > from && s.Start < to {
			out = append(out, Span{max(s.Start, from), min(s.End, to)})
		}
	}
	return out
}
