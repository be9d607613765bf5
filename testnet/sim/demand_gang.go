package sim

import "github.com/gleaner-net/gleaner/auction"

// GangsWiderThan turns every silver or bronze job of d asking more than
// width GPUs into a gang of the fewest members (2..auction.MaxGangMembers)
// that splits its GPUs evenly with at most width each: 8 GPUs over
// width 2 is 4 members of 2, 3 GPUs is 3 members of 1. Its work is kept
// exactly. It stands in for a trace's multi-node jobs (Philly's, issue
// 36), which this repository does not carry: the openb trace's tasks
// ask 1 to 8 GPUs of one node, and a supply whose providers hold fewer
// must run the wider ones as gangs. Gold jobs stay whole (a gang's
// reservation is not modelled). It returns the new demand and how many
// jobs became gangs.
func GangsWiderThan(d *Demand, width int) (*Demand, int) {
	out := &Demand{Jobs: make([]Job, len(d.Jobs)), Renters: d.Renters, Sources: d.Sources}
	copy(out.Jobs, d.Jobs)
	n := 0
	for i := range out.Jobs {
		j := &out.Jobs[i]
		if j.Gang() || j.GPUs <= width || j.Tier == auction.Gold || width < 1 {
			continue
		}
		for m := 2; m <= auction.MaxGangMembers; m++ {
			if j.GPUs%m == 0 && j.GPUs/m <= width {
				j.GPUs, j.Members = j.GPUs/m, m
				n++
				break
			}
		}
	}
	return out, n
}
