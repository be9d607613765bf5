package sim

import (
	"fmt"
	"slices"
	"strings"
)

// ExpandArrays is d with every array row (Job.Shards > 1, issue 36)
// replaced by its shards, in place of the row and in shard order: each a
// job of the row's duration, GPUs, models, tier, price, region and
// renter, with Array naming the array and Shard its index. Every
// strategy then runs a shard as a job of its own, as node's renter does
// (each shard its own auction and lease); the market's renter decides
// which shards to place by renter.Array (srenter_array.go), the
// baselines release them as max_parallel allows (baseline_array.go).
// from[k] is the row of d that job k of the result came from. d without
// arrays is returned as it is.
func ExpandArrays(d *Demand) (out *Demand, from []int) {
	n, arrays := 0, 0
	for i := range d.Jobs {
		n += max(d.Jobs[i].Shards, 1)
		if d.Jobs[i].IsArray() {
			arrays++
		}
	}
	from = make([]int, 0, n)
	if arrays == 0 {
		for i := range d.Jobs {
			from = append(from, i)
		}
		return d, from
	}
	out = &Demand{Jobs: make([]Job, 0, n), Renters: d.Renters, Sources: slices.Clone(d.Sources)}
	for i, j := range d.Jobs {
		if !j.IsArray() {
			out.Jobs = append(out.Jobs, j)
			from = append(from, i)
			continue
		}
		for s := range j.Shards {
			sj := j
			sj.ID = fmt.Sprintf("%s.s%d", j.ID, s)
			sj.Shards, sj.MaxParallel = 0, j.Parallel(j.Shards)
			sj.Array, sj.Shard = fmt.Sprintf("%s#%d", j.ID, i), s
			out.Jobs = append(out.Jobs, sj)
			from = append(from, i)
		}
	}
	out.Sources = append(out.Sources, fmt.Sprintf("arrays: %d rows expanded into their shards, %d jobs in all", arrays, len(out.Jobs)))
	return out, from
}

// arrayGroups is d's expanded arrays: each array's shards' job indexes,
// in shard order, by Job.Array, and the arrays' names in first-job
// order.
func arrayGroups(d *Demand) (map[string][]int, []string) {
	groups := map[string][]int{}
	var names []string
	for i := range d.Jobs {
		a := d.Jobs[i].Array
		if a == "" {
			continue
		}
		if groups[a] == nil {
			names = append(names, a)
		}
		groups[a] = append(groups[a], i)
	}
	return groups, names
}

// ArraySplitOver is how long a batch job must be for demand.arraysplit
// to split it: an hour, so that each shard is still minutes of work.
const ArraySplitOver = 3600

// MaxArraySplit bounds demand.arraysplit (--array-split).
const MaxArraySplit = 64

// ArraysLongerThan is d with every silver or bronze batch job (not a
// gang) of more than over seconds run as a job array of shards shards,
// at most maxParallel at once (0: every shard), as a renter would split
// a long batch job into independent pieces; each shard's duration is
// the job's divided by shards, rounded up, so no work is dropped. n is
// how many rows became arrays. The result is not expanded
// (ExpandArrays).
func ArraysLongerThan(d *Demand, shards, maxParallel int, over int64) (out *Demand, n int) {
	out = &Demand{Jobs: slices.Clone(d.Jobs), Renters: d.Renters, Sources: slices.Clone(d.Sources)}
	if shards < 2 {
		return out, 0
	}
	for i := range out.Jobs {
		j := &out.Jobs[i]
		if j.Kind != KindBatch || j.Gang() || j.IsArray() || j.Tier == "gold" || j.Duration <= over || j.Duration < int64(shards) {
			continue
		}
		j.Duration = (j.Duration + int64(shards) - 1) / int64(shards)
		j.Shards, j.MaxParallel = shards, min(maxParallel, shards)
		n++
	}
	out.Sources = append(out.Sources, fmt.Sprintf("arrays: %d batch jobs longer than %d s split into %d shards, at most %d at once", n, over, shards, maxParallel))
	return out, n
}

// collapseArrays is d with each expanded array's shards (ExpandArrays)
// folded back into the array's row, so that a run's demand is written
// as the rows it read. d without shards is returned as it is.
func collapseArrays(d *Demand) *Demand {
	groups, _ := arrayGroups(d)
	if len(groups) == 0 {
		return d
	}
	out := &Demand{Renters: d.Renters, Sources: d.Sources}
	for _, j := range d.Jobs {
		if j.Array == "" {
			out.Jobs = append(out.Jobs, j)
			continue
		}
		if j.Shard != 0 {
			continue
		}
		n := len(groups[j.Array])
		j.ID = j.Array[:strings.LastIndexByte(j.Array, '#')]
		j.Shards, j.Array, j.Shard = n, "", 0
		if j.MaxParallel >= n {
			j.MaxParallel = 0 // every shard at once, as read
		}
		out.Jobs = append(out.Jobs, j)
	}
	return out
}
