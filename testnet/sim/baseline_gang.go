package sim

import (
	"cmp"
	"slices"

	"github.com/gleaner-net/gleaner/auction"
)

// Gangs in the central baselines (issue 36). A gang (Job.Members > 1) is
// placed only when Members distinct providers that serve it can each
// take one member at once: the scheduler sees every provider, so it
// needs no rendezvous, no awards held while the others are sought. Its
// members start together and stop together: a member's preemption
// stops every sibling at that instant, each keeping what the gang last
// checkpointed, and the gang waits again once all have stopped. The
// members are picked by the baseline's own rule, as for one job.

// tryPlaceGang places job's members now if enough providers can take one.
func (b *baselineSim) tryPlaceGang(job int) bool {
	j := &b.d.Jobs[job]
	if j.Tier == auction.Gold || len(b.jobs[job].runs) > 0 {
		return false // not modelled (refused by checkGangs); or running
	}
	var fits []blFit
	for _, p := range b.jobs[job].feas {
		if f, ok := b.fitOn(job, p); ok {
			fits = append(fits, f)
		}
	}
	if len(fits) < j.Members {
		return false
	}
	fits = b.rank(fits)[:j.Members]
	stop, limit := fits[0].stop, fits[0].limit
	for _, f := range fits[1:] {
		stop, limit = min(stop, f.stop), min(limit, f.limit)
	}
	natural := b.now + b.jobs[job].remaining/int64(j.Width())
	if cut := stop < natural && stop < b.opt.Horizon; cut && stop-b.now < b.opt.Notice+minBackfill {
		return false // a member would be stopped before the gang got going
	}
	for _, f := range fits {
		b.startRun(job, f.prov, j.Tier, stop, limit)
	}
	return true
}

// rank orders fits by the baseline's rule: its choice first.
func (b *baselineSim) rank(fits []blFit) []blFit {
	switch b.name {
	case BaselineRandom:
		b.rng.Shuffle(len(fits), func(x, y int) { fits[x], fits[y] = fits[y], fits[x] })
	case BaselineCheapest:
		slices.SortStableFunc(fits, func(x, y blFit) int { return cmp.Compare(x.floor, y.floor) })
	case BaselineCentralOnline:
		slices.SortStableFunc(fits, func(x, y blFit) int {
			return cmp.Or(cmp.Compare(x.spare, y.spare), cmp.Compare(x.floor, y.floor))
		})
	}
	return fits
}

// gangStopsWith brings every member of job's gang to stop by stop: one
// member's preemption stops the gang.
func (b *baselineSim) gangStopsWith(job int, stop int64) {
	for _, id := range b.jobs[job].runs {
		if r := &b.active[id]; r.stop > stop {
			r.stop = stop
			r.ver++
			b.push(blEvent{at: stop, kind: blRunEnd, run: id, ver: r.ver})
		}
	}
}

// slicesDelete is ids without id.
func slicesDelete(ids []int, id int) []int {
	return slices.DeleteFunc(ids, func(x int) bool { return x == id })
}
