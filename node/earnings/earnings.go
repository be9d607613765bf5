package earnings

import (
	"fmt"
	"math/big"
	"sort"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// Of is the provider's report over [from, to): its settled leases
// from its own feed f, those still running from the scheduler (active),
// and the offered time it recorded. Each lease's GPU-time is spread over
// the UTC days it ran, as offered time is.
func Of(f OwnFeed, active []sched.Info, offered map[string]OfferedDay, from, to time.Time) Result {
	res := Result{From: from, To: to.UTC(), Days: []Day{}, Jobs: []Job{}}
	var spans []DaySpan
	run := func(l *auction.Lease, end time.Time) int64 {
		start, end := leaseRun(l, end)
		spans = append(spans, Accrue(maxTime(start, from), minTime(end, to), l.GPUs)...)
		return gpuSeconds(start, end, l.GPUs)
	}
	settled := map[string]bool{} // job ID + renter + start of each settled lease
	for _, st := range f.Settlements {
		l := f.Leases[st.S.Lease]
		if l == nil || l.Provider != f.Self {
			continue
		}
		settled[leaseKey(l)] = true
		if st.Time < from.Unix() {
			continue // its run ended at its settlement, before the period
		}
		at := time.Unix(st.Time, 0)
		res.Jobs = append(res.Jobs, Job{Day: at.UTC().Format(DayLayout), JobID: l.JobID, Lease: st.S.Lease,
			Renter: l.Renter, Tier: l.Tier, GPUs: l.GPUs, GPUSeconds: run(l, at), Earned: st.S.Paid(), Settled: true})
	}
	today := to.UTC().Format(DayLayout)
	for _, in := range active {
		if in.State != sched.Started || settled[leaseKey(&in.Lease)] {
			continue // not running, or settled and not yet released
		}
		res.Jobs = append(res.Jobs, Job{Day: today, JobID: in.Lease.JobID, Renter: in.Lease.Renter, Tier: in.Lease.Tier,
			GPUs: in.Lease.GPUs, GPUSeconds: run(&in.Lease, to)})
	}
	days := map[string]*Day{}
	dayOf := func(d string) *Day {
		if e, ok := days[d]; ok {
			return e
		}
		e := &Day{Day: d, OfferedGPUS: offered[d].GPUSeconds}
		days[d] = e
		return e
	}
	for d := from; d.Before(to) && to.Sub(from) <= MaxPeriod; d = d.AddDate(0, 0, 1) { // every day of the period, those without a job too
		dayOf(d.Format(DayLayout))
	}
	for _, j := range res.Jobs {
		dayOf(j.Day).Earned += j.Earned
		res.Earned += j.Earned
	}
	for _, s := range spans {
		dayOf(s.Day).LeasedGPUS += s.GPUSeconds
	}
	var since int64
	for _, o := range offered {
		if since == 0 || o.From < since {
			since = o.From
		}
	}
	if since > 0 {
		t := time.Unix(since, 0).UTC()
		res.OfferedSince = &t
	}
	for _, e := range days {
		e.FillBP = fillBP(e.LeasedGPUS, e.OfferedGPUS)
		if _, recorded := offered[e.Day]; recorded {
			// Only days with a record count toward the period's rate:
			// leases before the node recorded would read as over 100%.
			res.LeasedGPUS += e.LeasedGPUS
			res.OfferedGPUS += e.OfferedGPUS
		}
		res.Days = append(res.Days, *e)
	}
	sort.Slice(res.Days, func(i, k int) bool { return res.Days[i].Day < res.Days[k].Day })
	sort.SliceStable(res.Jobs, func(i, k int) bool { return res.Jobs[i].Day < res.Jobs[k].Day })
	res.FillBP = fillBP(res.LeasedGPUS, res.OfferedGPUS)
	return res
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func leaseKey(l *auction.Lease) string {
	return fmt.Sprintf("%s\x00%s\x00%d", l.JobID, l.Renter, l.Start)
}

// fillBP is leased over offered in basis points, from integers, at most
// 10000 (a lease runs on while its GPUs are not offered: the offer
// paused, or the node stopped and not recording); nil when nothing was
// offered.
func fillBP(leased, offered int64) *int64 {
	if offered <= 0 {
		return nil
	}
	f := new(big.Int).Mul(big.NewInt(leased), big.NewInt(10000))
	v := min(f.Quo(f, big.NewInt(offered)).Int64(), 10000)
	return &v
}

// leaseRun is when l held its GPUs: from its start to end, at most to the
// lease's end. The feed holds no run times (a settlement says only what
// was charged, capped by the vouchers), so the lease's own window and the
// settlement's time bound it.
func leaseRun(l *auction.Lease, end time.Time) (time.Time, time.Time) {
	if e := time.Unix(l.End, 0); end.After(e) {
		end = e
	}
	return time.Unix(l.Start, 0), end
}

// gpuSeconds is gpus GPUs over [from, to), in whole seconds.
func gpuSeconds(from, to time.Time, gpus int) int64 {
	if !to.After(from) {
		return 0
	}
	return int64(to.Sub(from)/time.Second) * int64(gpus)
}
