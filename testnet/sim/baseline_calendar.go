package sim

import "slices"

// blCommit is GPUs of a provider committed over [start, end): a silver
// run (from its start to its natural end) or a gold reservation (its
// reserved span, booked ahead).
type blCommit struct {
	start, end int64
	gpus       int
	job        int
}

// blCal is one provider's calendar: commitments, and the bronze runs
// holding GPUs now (ids into baselineSim.active, oldest first; an older
// bronze keeps its GPUs before a younger one when a reservation needs
// some of them).
type blCal struct {
	commits []blCommit
	bronze  []int
}

// commitUse is the GPUs committed at instant t.
func (c *blCal) commitUse(t int64) int {
	n := 0
	for _, k := range c.commits {
		if k.start <= t && t < k.end {
			n += k.gpus
		}
	}
	return n
}

// commitStarts are the starts of commitments strictly inside (from, to),
// sorted: the only instants after from where a calendar's use can rise.
func (c *blCal) commitStarts(from, to int64) []int64 {
	var ts []int64
	for _, k := range c.commits {
		if k.start > from && k.start < to {
			ts = append(ts, k.start)
		}
	}
	slices.Sort(ts)
	return ts
}

// removeCommit drops job's commitment.
func (c *blCal) removeCommit(job int) {
	c.commits = slices.DeleteFunc(c.commits, func(k blCommit) bool { return k.job == job })
}

// windowAt is the window of p containing t.
func windowAt(p *Provider, t int64) (Span, bool) {
	i, _ := slices.BinarySearchFunc(p.Windows, t, func(w Span, t int64) int {
		switch {
		case w.End <= t:
			return -1
		case w.Start > t:
			return 1
		}
		return 0
	})
	if i < len(p.Windows) && p.Windows[i].Start <= t && t < p.Windows[i].End {
		return p.Windows[i], true
	}
	return Span{}, false
}

// bronzeUse is the GPUs that the bronze runs ids (all started by now)
// still hold at t >= now.
func (b *baselineSim) bronzeUse(ids []int, t int64) int {
	n := 0
	for _, id := range ids {
		if b.active[id].stop > t {
			n += b.active[id].gpus
		}
	}
	return n
}

// peakUse is the most GPUs of p in use at any instant of [from, to):
// commitments, plus the running bronze if withBronze. Commitments only
// rise at their starts and running bronze only falls, so the peak is at
// from or at a commitment's start.
func (b *baselineSim) peakUse(p int, from, to int64, withBronze bool) int {
	c := &b.cals[p]
	use := func(t int64) int {
		n := c.commitUse(t)
		if withBronze {
			n += b.bronzeUse(c.bronze, t)
		}
		return n
	}
	peak := use(from)
	for _, t := range c.commitStarts(from, to) {
		peak = max(peak, use(t))
	}
	return peak
}

// bronzeLimit is the first instant in [from, limit) at which a bronze run
// of gpus on p, behind the older bronze runs prior, would not fit beside
// the commitments; limit if it fits throughout.
func (b *baselineSim) bronzeLimit(p int, prior []int, from int64, gpus int, limit int64) int64 {
	c := &b.cals[p]
	capGPUs := b.s.Providers[p].GPUs
	fits := func(t int64) bool { return c.commitUse(t)+b.bronzeUse(prior, t)+gpus <= capGPUs }
	if !fits(from) {
		return from
	}
	for _, t := range c.commitStarts(from, limit) {
		if !fits(t) {
			return t
		}
	}
	return limit
}

// refitBronze recomputes when p's bronze runs must stop after a new
// reservation: oldest first, each until the first instant its GPUs are
// needed. A changed stop reschedules the run's end.
func (b *baselineSim) refitBronze(p int) {
	c := &b.cals[p]
	for i, id := range c.bronze {
		r := &b.active[id]
		stop := b.bronzeLimit(p, c.bronze[:i], b.now, r.gpus, min(r.limit, r.natural))
		if stop != r.stop {
			r.stop = stop
			r.ver++
			b.push(blEvent{at: stop, kind: blRunEnd, run: id, ver: r.ver})
			b.gangStopsWith(r.job, stop)
		}
	}
}
