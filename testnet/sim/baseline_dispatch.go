package sim

import (
	"slices"

	"github.com/gleaner-net/gleaner/auction"
)

// blFit is one provider that can take a job now, and on what terms.
type blFit struct {
	prov  int
	spare int             // GPUs left free beside it (best-fit picks the fewest)
	floor auction.Credits // its floor for the job's tier
	stop  int64           // when the run would end
	limit int64           // bronze: its window's end or the horizon
}

// fitOn says whether p can take job now: a gold reservation over its
// whole span, a silver run to its end, or a bronze run worth starting.
func (b *baselineSim) fitOn(job, p int) (blFit, bool) {
	j := &b.d.Jobs[job]
	pr := &b.s.Providers[p]
	g := j.GPUs
	f := blFit{prov: p, floor: TierFloor(pr.Floors, j.Tier)}
	switch j.Tier {
	case auction.Gold:
		s := b.goldStartAt(job)
		w, ok := windowAt(pr, s)
		if s < b.now || !ok || s+j.Duration > w.End {
			return f, false
		}
		f.spare = pr.GPUs - b.peakUse(p, s, s+j.Duration, false) - g
		return f, f.spare >= 0
	case auction.Silver:
		w, ok := windowAt(pr, b.now)
		natural := b.now + b.jobs[job].remaining/int64(j.Width())
		if !ok || natural > w.End {
			return f, false
		}
		f.spare = pr.GPUs - b.peakUse(p, b.now, natural, true) - g
		f.stop = min(natural, b.opt.Horizon)
		return f, f.spare >= 0
	case auction.Bronze:
		w, ok := windowAt(pr, b.now)
		if !ok {
			return f, false
		}
		natural := b.now + b.jobs[job].remaining/int64(j.Width())
		f.limit = min(w.End, b.opt.Horizon)
		end := min(natural, f.limit)
		f.stop = b.bronzeLimit(p, b.cals[p].bronze, b.now, g, end)
		if f.stop <= b.now {
			return f, false
		}
		cut := f.stop < natural && f.stop < b.opt.Horizon
		if cut && f.stop-b.now < b.opt.Notice+minBackfill {
			return f, false // it would be stopped before it got going
		}
		f.spare = pr.GPUs - b.cals[p].commitUse(b.now) - b.bronzeUse(b.cals[p].bronze, b.now) - g
		return f, true
	}
	return f, false
}

// choose picks among fits (in provider order) by the baseline's rule.
func (b *baselineSim) choose(fits []blFit) blFit {
	best := fits[0]
	switch b.name {
	case BaselineRandom:
		return fits[b.rng.IntN(len(fits))]
	case BaselineCheapest:
		for _, f := range fits[1:] {
			if f.floor < best.floor {
				best = f
			}
		}
	case BaselineCentralOnline: // best fit: fewest spare GPUs, then cheapest
		for _, f := range fits[1:] {
			if f.spare < best.spare || f.spare == best.spare && f.floor < best.floor {
				best = f
			}
		}
	}
	return best
}

// place starts (or books) job as f says.
func (b *baselineSim) place(job int, f blFit) {
	if t := b.d.Jobs[job].Tier; t == auction.Gold {
		b.bookGold(job, f.prov)
	} else {
		b.startRun(job, f.prov, t, f.stop, f.limit)
	}
}

// tryPlace places job on the provider its baseline picks among those
// that can take it now; false if none can.
func (b *baselineSim) tryPlace(job int) bool {
	if b.now >= b.opt.Horizon {
		return false
	}
	if b.d.Jobs[job].Gang() {
		return b.tryPlaceGang(job)
	}
	var fits []blFit
	for _, p := range b.jobs[job].feas {
		if f, ok := b.fitOn(job, p); ok {
			fits = append(fits, f)
		}
	}
	if len(fits) == 0 {
		return false
	}
	b.place(job, b.choose(fits))
	return true
}

func (b *baselineSim) arrive(job int) {
	j := &b.d.Jobs[job]
	for p := range b.s.Providers {
		if ProviderServes(&b.s.Providers[p], j) {
			b.jobs[job].feas = append(b.jobs[job].feas, p)
		}
	}
	if b.tryPlace(job) {
		return
	}
	switch {
	case b.central():
		b.enqueue(job)
		at := b.jobs[job].since + b.opt.Patience
		if j.Tier == auction.Gold {
			at = b.goldStartAt(job)
		}
		b.push(blEvent{at: at, kind: blGiveUp, job: job})
	case j.Tier == auction.Gold:
		b.out[job].Reason = "no capacity for the reservation"
	default:
		b.scheduleRetry(job)
	}
}

func (b *baselineSim) retry(job int) {
	if !b.tryPlace(job) {
		b.scheduleRetry(job)
	}
}

// scheduleRetry has a waiting job try again in Retry seconds, while its
// patience lasts (until the horizon once it has run).
func (b *baselineSim) scheduleRetry(job int) {
	deadline := b.opt.Horizon - 1
	if !b.jobs[job].started {
		deadline = min(deadline, b.jobs[job].since+b.opt.Patience)
	}
	if next := b.now + b.opt.Retry; next <= deadline {
		b.push(blEvent{at: next, kind: blRetry, job: job})
	} else if !b.jobs[job].started && b.now+b.opt.Retry > b.jobs[job].since+b.opt.Patience {
		b.out[job].Reason = "no capacity"
		b.shardDone(job)
	}
}

// waitAgain: a preempted bronze job looks for GPUs again at once.
func (b *baselineSim) waitAgain(job int) {
	if b.tryPlace(job) {
		return
	}
	if b.central() {
		b.enqueue(job)
	} else {
		b.scheduleRetry(job)
	}
}

func (b *baselineSim) giveUp(job int) {
	if !b.jobs[job].queued || b.jobs[job].started {
		return
	}
	b.dequeue(job)
	if b.d.Jobs[job].Tier == auction.Gold {
		b.out[job].Reason = "no capacity for the reservation"
	} else {
		b.out[job].Reason = "no capacity"
		b.shardDone(job)
	}
}

// blQueueCmp orders central-online's queue: gold first, then by
// submission, then by index.
func (b *baselineSim) blQueueCmp(x, y int) int {
	gx, gy := b.d.Jobs[x].Tier == auction.Gold, b.d.Jobs[y].Tier == auction.Gold
	switch {
	case gx != gy && gx:
		return -1
	case gx != gy:
		return 1
	case b.d.Jobs[x].Submit != b.d.Jobs[y].Submit:
		return int(b.d.Jobs[x].Submit - b.d.Jobs[y].Submit)
	}
	return x - y
}

func (b *baselineSim) enqueue(job int) {
	i, _ := slices.BinarySearchFunc(b.queue, job, b.blQueueCmp)
	b.queue = slices.Insert(b.queue, i, job)
	b.jobs[job].queued = true
}

func (b *baselineSim) dequeue(job int) {
	if i, ok := slices.BinarySearchFunc(b.queue, job, b.blQueueCmp); ok {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	b.jobs[job].queued = false
}

// dispatchProvider gives GPUs freed on p (a run ended, a window opened)
// to the queue in order. Nothing else changed since every queued job
// last failed to fit anywhere, so p is the only provider to try.
func (b *baselineSim) dispatchProvider(p int) {
	if len(b.queue) == 0 || b.now >= b.opt.Horizon {
		return
	}
	for _, job := range slices.Clone(b.queue) {
		if !ProviderServes(&b.s.Providers[p], &b.d.Jobs[job]) {
			continue
		}
		if f, ok := b.fitOn(job, p); ok {
			if b.d.Jobs[job].Gang() {
				// p is one member's place; the others' are looked for
				// over every provider, all free at once.
				if b.tryPlaceGang(job) {
					b.dequeue(job)
				}
				continue
			}
			b.dequeue(job)
			b.place(job, f)
		}
	}
}
