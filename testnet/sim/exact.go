package sim

import (
	"fmt"
	"slices"

	"github.com/gleaner-net/gleaner/auction"
)

// Limits of ExactOptimum: its search is exponential.
const (
	exactMaxJobs      = 10
	exactMaxProviders = 4
	exactMaxSlots     = 48
)

// ExactOptimum is the most useful GPU-seconds any schedule can fill on a
// small instance, found by exhaustive branch-and-bound. The model:
//   - each job runs at most once, contiguously, on one provider that
//     serves it (ProviderServes), on exactly its GPUs;
//   - it starts at its Submit or at a slot boundary k*slot after it and
//     before the horizon; gold only at max(Start, Submit);
//   - silver and gold run [start, start+Duration), which must lie inside
//     one window; bronze starts inside a window and runs until its work is
//     done, the window ends or the horizon, whichever is first, keeping
//     all its progress (as if it checkpointed at the very end);
//   - useful work is what runs before the horizon;
//   - at no instant does a provider run more GPUs than it has.
//
// It returns an error for more than 10 jobs, 4 providers or 48 slots,
// or a gang.
func ExactOptimum(s *Supply, d *Demand, horizon, slot int64) (int64, error) {
	if slot <= 0 || horizon <= 0 {
		return 0, fmt.Errorf("exact optimum: horizon %d and slot %d must be positive", horizon, slot)
	}
	slots := (horizon + slot - 1) / slot
	switch {
	case len(d.Jobs) > exactMaxJobs:
		return 0, fmt.Errorf("exact optimum: %d jobs, at most %d", len(d.Jobs), exactMaxJobs)
	case len(s.Providers) > exactMaxProviders:
		return 0, fmt.Errorf("exact optimum: %d providers, at most %d", len(s.Providers), exactMaxProviders)
	case slots > exactMaxSlots:
		return 0, fmt.Errorf("exact optimum: %d slots, at most %d", slots, exactMaxSlots)
	}
	for i := range d.Jobs {
		if d.Jobs[i].Gang() {
			return 0, fmt.Errorf("exact optimum: job %s is a gang: not modelled here", d.Jobs[i].ID)
		}
	}
	x := &exactSearch{placed: make([][]exactRun, len(s.Providers)), s: s}
	for i := range d.Jobs {
		if opts := exactOptions(s, &d.Jobs[i], horizon, slot); len(opts) > 0 {
			x.jobs = append(x.jobs, opts)
		}
	}
	// Most valuable jobs first: good schedules early, tight pruning.
	slices.SortStableFunc(x.jobs, func(a, b []exactRun) int { return int(b[0].useful - a[0].useful) })
	x.rest = make([]int64, len(x.jobs)+1)
	for k := len(x.jobs) - 1; k >= 0; k-- {
		x.rest[k] = x.rest[k+1] + x.jobs[k][0].useful
	}
	x.search(0, 0)
	return x.best, nil
}

// exactRun is one way to run a job: on prov over [start, end) on gpus.
type exactRun struct {
	prov       int
	start, end int64
	gpus       int
	useful     int64
}

// exactOptions lists the ways j can run, most useful first.
func exactOptions(s *Supply, j *Job, horizon, slot int64) []exactRun {
	sub := max(j.Submit, 0)
	if sub >= horizon || j.Duration <= 0 || j.GPUs <= 0 {
		return nil
	}
	starts := []int64{sub}
	if j.Tier == auction.Gold {
		starts = []int64{max(j.Start, sub)}
	} else {
		for t := (sub/slot + 1) * slot; t < horizon; t += slot {
			starts = append(starts, t)
		}
	}
	var opts []exactRun
	for p := range s.Providers {
		pr := &s.Providers[p]
		if !ProviderServes(pr, j) {
			continue
		}
		for _, st := range starts {
			w, ok := windowAt(pr, st)
			if !ok || st >= horizon {
				continue
			}
			end := st + j.Duration
			if j.Tier == auction.Bronze {
				end = min(end, w.End)
			} else if end > w.End {
				continue
			}
			end = min(end, horizon)
			opts = append(opts, exactRun{prov: p, start: st, end: end, gpus: j.GPUs, useful: (end - st) * int64(j.GPUs)})
		}
	}
	slices.SortStableFunc(opts, func(a, b exactRun) int { return int(b.useful - a.useful) })
	return opts
}

// exactSearch is the branch-and-bound state.
type exactSearch struct {
	s      *Supply
	jobs   [][]exactRun // per job (valuable first): its options
	rest   []int64      // rest[k]: the most jobs k.. could add
	placed [][]exactRun // per provider: the runs chosen so far
	best   int64
}

func (x *exactSearch) search(k int, got int64) {
	x.best = max(x.best, got)
	if k == len(x.jobs) || got+x.rest[k] <= x.best || x.best == x.rest[0] {
		return
	}
	for _, r := range x.jobs[k] {
		if got+r.useful+x.rest[k+1] <= x.best {
			break // options are sorted: none further can do better
		}
		if x.fits(r) {
			x.placed[r.prov] = append(x.placed[r.prov], r)
			x.search(k+1, got+r.useful)
			x.placed[r.prov] = x.placed[r.prov][:len(x.placed[r.prov])-1]
		}
	}
	x.search(k+1, got) // or leave job k out
}

// fits: r's GPUs are free on its provider over its whole span. Use only
// rises at a run's start, so checking r's start and the starts inside it
// suffices.
func (x *exactSearch) fits(r exactRun) bool {
	on := x.placed[r.prov]
	use := func(t int64) int {
		n := r.gpus
		for _, o := range on {
			if o.start <= t && t < o.end {
				n += o.gpus
			}
		}
		return n
	}
	capGPUs := x.s.Providers[r.prov].GPUs
	if use(r.start) > capGPUs {
		return false
	}
	for _, o := range on {
		if o.start > r.start && o.start < r.end && use(o.start) > capGPUs {
			return false
		}
	}
	return true
}
