package sim

import "slices"

// ArrayMetrics is how a strategy did by the demand's job arrays (rows
// with shards, expanded by ExpandArrays; issue 36); nil in Metrics when
// the demand has none.
type ArrayMetrics struct {
	Arrays    int `json:"arrays"`
	Shards    int `json:"shards"`
	Completed int `json:"completed"` // arrays whose every shard completed
	// Makespan is from the array's submission to its last shard's end,
	// over the arrays completed.
	MakespanP50Sec int64 `json:"makespan_p50_sec"`
	MakespanP95Sec int64 `json:"makespan_p95_sec"`
	// OverIdeal is each completed array's makespan over its ideal: its
	// shards run max_parallel at a time from submission, back to back,
	// nothing lost (ceil(shards / max_parallel) shard durations); 1 is
	// as fast as the array could go.
	OverIdealP50 float64 `json:"over_ideal_p50"`
	OverIdealP95 float64 `json:"over_ideal_p95"`
}

// arrayMakespans is each array's makespan in seconds by Job.Array, for
// the arrays whose every shard completed, and each array's ideal.
func arrayMakespans(d *Demand, st Strategy) (spans, ideals map[string]int64) {
	groups, _ := arrayGroups(d)
	spans, ideals = map[string]int64{}, map[string]int64{}
	for name, jobs := range groups {
		first := &d.Jobs[jobs[0]]
		par := int64(max(first.MaxParallel, 1))
		ideals[name] = (int64(len(jobs)) + par - 1) / par * first.Duration
		end, all := int64(0), true
		for _, k := range jobs {
			if k >= len(st.Outcomes) || !st.Outcomes[k].Completed {
				all = false
				break
			}
			end = max(end, st.Outcomes[k].Finished)
		}
		if all {
			spans[name] = end - first.Submit
		}
	}
	return spans, ideals
}

// arrayMetrics measures st's arrays; nil when d has none.
func arrayMetrics(d *Demand, st Strategy) *ArrayMetrics {
	groups, _ := arrayGroups(d)
	if len(groups) == 0 {
		return nil
	}
	a := ArrayMetrics{Arrays: len(groups)}
	spans, ideals := arrayMakespans(d, st)
	var ms []int64
	var over []float64
	for name, jobs := range groups {
		a.Shards += len(jobs)
		if s, ok := spans[name]; ok {
			a.Completed++
			ms = append(ms, s)
			over = append(over, shareOf(float64(s), float64(ideals[name])))
		}
	}
	slices.Sort(ms)
	slices.Sort(over)
	a.MakespanP50Sec, a.MakespanP95Sec = nearestRank(ms, 50), nearestRank(ms, 95)
	a.OverIdealP50, a.OverIdealP95 = nearestRank(over, 50), nearestRank(over, 95)
	return &a
}

// ArrayMakespanRatios is, for every array both strategies completed, a's
// makespan over b's (such as the market's over central-online's),
// sorted.
func ArrayMakespanRatios(d *Demand, a, b Strategy) []float64 {
	sa, _ := arrayMakespans(d, a)
	sb, _ := arrayMakespans(d, b)
	var out []float64
	for name, x := range sa {
		if y, ok := sb[name]; ok && y > 0 {
			out = append(out, float64(x)/float64(y))
		}
	}
	slices.Sort(out)
	return out
}
