package sim

import (
	"container/heap"
	"math/rand/v2"

	"github.com/gleaner-net/gleaner/auction"
)

// Event kinds of the baselines' simulation.
const (
	blArrive     = iota // a job is submitted
	blRetry             // a waiting job tries again (non-queueing baselines)
	blGoldStart         // a booked reservation begins
	blRunEnd            // a run completes or is stopped
	blWindowOpen        // a provider's window opens (central-online)
	blGiveUp            // a queued job's patience runs out (central-online)
)

// blEvent is one event; (at, seq) orders them, so that equal times keep
// the order they were scheduled in and every run is deterministic.
type blEvent struct {
	at, seq int64
	kind    int
	job     int
	prov    int
	run     int
	ver     int
}

// blHeap is a min-heap (container/heap) of events by (at, seq).
type blHeap []blEvent

func (h blHeap) Len() int { return len(h) }
func (h blHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h blHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *blHeap) Push(x any)   { *h = append(*h, x.(blEvent)) }
func (h *blHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// blActive is one run in progress.
type blActive struct {
	job, prov int
	tier      auction.Tier
	gpus      int
	start     int64
	natural   int64 // when its remaining work would be done
	limit     int64 // bronze: its window's end or the horizon, whichever is first
	stop      int64 // when it ends: natural, or earlier if cut
	ver       int   // bumped when stop moves, to ignore stale end events
}

// blJobState is the simulation's view of one job.
type blJobState struct {
	remaining int64 // GPU-seconds of work left
	started   bool  // it ran (or its reservation was booked) at least once
	queued    bool  // waiting in central-online's queue
	// since is when the job was submitted to the baseline, its patience
	// counted from then: its Submit, or when its array released it.
	since int64
	feas  []int // providers that serve it, computed at arrival
	// runs is a gang's current runs (ids into active), one per member:
	// they start together and stop together (baseline_gang.go).
	runs []int
}

// baselineSim is one run of one baseline.
type baselineSim struct {
	name   string
	s      *Supply
	d      *Demand
	opt    BaselineOptions
	rng    *rand.Rand
	cals   []blCal
	jobs   []blJobState
	active []blActive
	out    []Outcome
	events blHeap
	seq    int64
	now    int64
	queue  []int               // central-online: waiting jobs, in blQueueBefore order
	arrays map[string]*blArray // by Job.Array (baseline_array.go)
}

func newBaselineSim(name string, s *Supply, d *Demand, opt BaselineOptions) *baselineSim {
	b := &baselineSim{
		name: name, s: s, d: d, opt: opt,
		rng:  rand.New(rand.NewPCG(opt.Seed, 0xba5e)),
		cals: make([]blCal, len(s.Providers)),
		jobs: make([]blJobState, len(d.Jobs)),
		out:  make([]Outcome, len(d.Jobs)),
	}
	for i, j := range d.Jobs {
		b.jobs[i].remaining = j.Work()
		b.jobs[i].since = j.Submit
		b.out[i].Job = i
	}
	return b
}

func (b *baselineSim) central() bool { return b.name == BaselineCentralOnline }

func (b *baselineSim) push(e blEvent) {
	e.seq = b.seq
	b.seq++
	heap.Push(&b.events, e)
}

func (b *baselineSim) run() {
	h := b.opt.Horizon
	for i, j := range b.d.Jobs {
		if j.Submit < h && j.Duration > 0 && j.GPUs > 0 {
			b.push(blEvent{at: max(j.Submit, 0), kind: blArrive, job: i})
		}
	}
	if b.central() {
		for p, pr := range b.s.Providers {
			for _, w := range pr.Windows {
				if w.Start > 0 && w.Start < h {
					b.push(blEvent{at: w.Start, kind: blWindowOpen, prov: p})
				}
			}
		}
	}
	for len(b.events) > 0 {
		e := heap.Pop(&b.events).(blEvent)
		if e.at > h {
			break
		}
		b.now = e.at
		b.handle(e)
	}
	b.finish()
}

func (b *baselineSim) handle(e blEvent) {
	switch e.kind {
	case blArrive:
		if !b.holdShard(e.job) {
			b.arrive(e.job)
		}
	case blRetry:
		b.retry(e.job)
	case blGoldStart:
		b.goldStart(e.job, e.prov)
	case blRunEnd:
		if r := &b.active[e.run]; r.ver == e.ver && r.stop == e.at {
			b.endRun(e.run)
		}
	case blWindowOpen:
		b.dispatchProvider(e.prov)
	case blGiveUp:
		b.giveUp(e.job)
	}
}

// goldStartAt is when job's reservation begins: its Start, or its
// submission if Start lies before it.
func (b *baselineSim) goldStartAt(job int) int64 {
	j := &b.d.Jobs[job]
	return max(j.Start, j.Submit, 0)
}

// startRun starts job's remaining work on p now, until stop.
func (b *baselineSim) startRun(job, p int, tier auction.Tier, stop, limit int64) {
	j := &b.d.Jobs[job]
	id := len(b.active)
	natural := b.now + b.jobs[job].remaining/int64(j.Width())
	b.active = append(b.active, blActive{job: job, prov: p, tier: tier, gpus: j.GPUs,
		start: b.now, natural: natural, limit: limit, stop: stop})
	switch tier {
	case auction.Silver:
		b.cals[p].commits = append(b.cals[p].commits, blCommit{start: b.now, end: natural, gpus: j.GPUs, job: job})
	case auction.Bronze:
		b.cals[p].bronze = append(b.cals[p].bronze, id)
	}
	b.jobs[job].started = true
	if j.Gang() {
		b.jobs[job].runs = append(b.jobs[job].runs, id)
	}
	b.push(blEvent{at: stop, kind: blRunEnd, run: id})
}

// bookGold commits p's GPUs for job's reservation and schedules its start.
func (b *baselineSim) bookGold(job, p int) {
	j := &b.d.Jobs[job]
	s := b.goldStartAt(job)
	b.cals[p].commits = append(b.cals[p].commits, blCommit{start: s, end: s + j.Duration, gpus: j.GPUs, job: job})
	b.jobs[job].started = true
	b.refitBronze(p)
	b.push(blEvent{at: s, kind: blGoldStart, job: job, prov: p})
}

func (b *baselineSim) goldStart(job, p int) {
	if b.now >= b.opt.Horizon {
		return
	}
	end := b.now + b.jobs[job].remaining/int64(b.d.Jobs[job].Width())
	b.startRun(job, p, auction.Gold, min(end, b.opt.Horizon), b.opt.Horizon)
}

// endRun closes run id at its stop: records it, frees its GPUs and lets
// a preempted bronze job wait again.
func (b *baselineSim) endRun(id int) {
	r := b.active[id]
	j := &b.d.Jobs[r.job]
	o := &b.out[r.job]
	c := &b.cals[r.prov]
	secs := r.stop - r.start
	useful := secs * int64(r.gpus)
	preempted := false
	if r.tier == auction.Bronze {
		for k, x := range c.bronze {
			if x == id {
				c.bronze = append(c.bronze[:k], c.bronze[k+1:]...)
				break
			}
		}
		if r.stop < r.natural && r.stop < b.opt.Horizon {
			preempted = true
			useful = secs / b.opt.CheckpointSec * b.opt.CheckpointSec * int64(r.gpus)
		}
	} else {
		c.removeCommit(r.job)
	}
	if secs > 0 {
		gs := secs * int64(r.gpus)
		price, paid := hubCharge(TierFloor(b.s.Providers[r.prov].Floors, r.tier), b.opt.HubFeeBP, gs)
		o.Runs = append(o.Runs, Run{Provider: r.prov, GPUs: r.gpus, Start: r.start, End: r.stop,
			Useful: useful, Lost: gs - useful, Price: price, Paid: paid, Preempted: preempted})
	}
	o.Done += useful
	b.jobs[r.job].remaining -= useful
	if b.jobs[r.job].remaining == 0 {
		o.Completed, o.Finished = true, r.stop
		b.shardDone(r.job)
	}
	if r.tier == auction.Gold {
		o.Honoured = r.start-j.Start <= goldGrace && r.start >= j.Start
	}
	if j.Gang() {
		// The gang waits again once its last member has stopped.
		js := &b.jobs[r.job]
		js.runs = slicesDelete(js.runs, id)
		preempted = preempted && len(js.runs) == 0
	}
	if preempted && b.now < b.opt.Horizon {
		b.waitAgain(r.job)
	}
	if b.central() && b.now < b.opt.Horizon {
		b.dispatchProvider(r.prov)
	}
}

// finish names why each unfinished job did not complete.
func (b *baselineSim) finish() {
	for i := range b.out {
		o := &b.out[i]
		if o.Completed {
			o.Reason = ""
		} else if o.Reason == "" {
			o.Reason = "horizon"
		}
	}
}
