package sim

import "slices"

// GangMetrics is how a strategy did by the demand's gangs (Job.Members >
// 1, issue 36); nil in Metrics when the demand has none.
type GangMetrics struct {
	Jobs      int `json:"jobs"`
	Completed int `json:"completed"`
	// Placed is the gangs that ever had every member running at once.
	Placed           int     `json:"placed"`
	DemandedGPUHours float64 `json:"demanded_gpu_hours"`
	UsefulGPUHours   float64 `json:"useful_gpu_hours"`
	// FillShare is useful over demanded GPU-hours: how much of the
	// gangs' work was done.
	FillShare float64 `json:"fill_share"`
	// Wait is from submission to every member running (the barrier),
	// over the gangs placed.
	WaitP50Sec int64 `json:"wait_p50_sec"`
	WaitP95Sec int64 `json:"wait_p95_sec"`
	// PreemptionLost is the GPU-hours run by the members of placements a
	// preemption stopped, past the gang's last checkpoint: the preempted
	// member's and the siblings' stopped with it.
	PreemptionLostGPUHours float64 `json:"preemption_lost_gpu_hours"`
	PreemptedPlacements    int     `json:"preempted_placements"`
}

// gangMetrics measures st's gangs; nil when d has none.
func gangMetrics(d *Demand, st Strategy) *GangMetrics {
	var g GangMetrics
	var demanded, useful, lost int64
	var waits []int64
	for _, o := range st.Outcomes {
		if o.Job < 0 || o.Job >= len(d.Jobs) || !d.Jobs[o.Job].Gang() {
			continue
		}
		j := &d.Jobs[o.Job]
		g.Jobs++
		demanded += j.Work()
		useful += o.Done
		if o.Completed {
			g.Completed++
		}
		if at, ok := allRunning(o.Runs, j.Members); ok {
			g.Placed++
			waits = append(waits, at-j.Submit)
		}
		// Every member of a preempted placement is marked preempted.
		preempted := 0
		for _, r := range o.Runs {
			if r.Preempted {
				lost += r.Lost
				preempted++
			}
		}
		g.PreemptedPlacements += (preempted + j.Members - 1) / j.Members
	}
	if g.Jobs == 0 {
		return nil
	}
	slices.Sort(waits)
	g.DemandedGPUHours, g.UsefulGPUHours = gpuHours(demanded), gpuHours(useful)
	g.FillShare = shareOf(float64(useful), float64(demanded))
	g.WaitP50Sec, g.WaitP95Sec = nearestRank(waits, 50), nearestRank(waits, 95)
	g.PreemptionLostGPUHours = gpuHours(lost)
	return &g
}

// allRunning is the first instant at which members of runs ran at once:
// a gang's barrier passed. Its members' starts may differ by their
// providers' round trips; the last of them is when all run.
func allRunning(runs []Run, members int) (int64, bool) {
	starts := make([]int64, 0, len(runs))
	for _, r := range runs {
		starts = append(starts, r.Start)
	}
	slices.Sort(starts)
	for _, t := range starts {
		n := 0
		for _, r := range runs {
			if r.Start <= t && t < r.End {
				n++
			}
		}
		if n >= members {
			return t, true
		}
	}
	return 0, false
}
