package provider

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// handle carries out one event as the node's adapters would.
func (m *sim) handle(ev event) {
	var j *simJob
	if ev.kind != evArrive && ev.kind != evReturn {
		j = m.order[ev.ref]
	}
	switch ev.kind {
	case evArrive:
		if next := ev.ref + 1; int(next) < len(m.w.plans) {
			m.after(t0.Add(m.w.plans[next].arrive).Sub(m.now), evArrive, next)
		}
		if p := &m.w.plans[ev.ref]; p.reclaim {
			m.out[p.reclaimG] = "the owner's render"
			m.do(m.s.SetAvailability(availability(simGPUs, m.out), m.now))
			m.after(p.dur, evReturn, ev.ref)
		} else {
			m.arrive(p)
		}
	case evReturn:
		delete(m.out, m.w.plans[ev.ref].reclaimG)
		m.do(m.s.SetAvailability(availability(simGPUs, m.out), m.now))
	case evStart:
		acts, err := m.s.Start(j.p.id, m.now)
		// ErrExpired: a bronze award started inside its notice before
		// the window closes is refused, and expires at the next tick.
		if err != nil && !errors.Is(err, ErrEnding) && !errors.Is(err, ErrExpired) {
			panic(fmt.Sprintf("start %s: %v", j.p.id, err))
		}
		j.refused = errors.Is(err, ErrExpired)
		m.do(acts)
	case evRunning:
		if j.ending != 0 || j.releases > 0 {
			return // told to stop before its container ran
		}
		if err := m.s.Running(j.p.id, m.now); err != nil {
			panic(err)
		}
		j.running, j.runAt = true, m.now
		if j.p.pays != 0 {
			m.pay(j)
		}
		m.after(j.p.work, evExit, j.idx)
	case evVoucher:
		if j.ending == 0 && j.releases == 0 {
			m.pay(j)
		}
	case evExit:
		if j.ending == 0 && !j.paused && j.releases == 0 {
			j.exited, j.endAt = true, m.now
			m.release(j)
		}
	case evRelease:
		m.release(j)
	}
}

// arrive is a renter's auction as the provider sees it: the feasibility
// checks of auction's matcher (the tier against the owner's windows),
// then the quote, the award and a start 50 ms later.
func (m *sim) arrive(p *simPlan) {
	start := m.now
	if p.tier == auction.Gold {
		start = m.now.Add(p.lead)
	}
	left := auction.AvailableFor(m.w.windows, start)
	if left <= 0 || (p.tier != auction.Bronze && left < p.dur) {
		m.declined++
		return
	}
	// The quote: the floor in force over the job's window, surged with
	// utilisation within the owner's cap; above the renter's max_price
	// there is no bid.
	o := m.w.offer
	floor := o.FloorFor(p.tier, start, p.dur)
	price := o.Pricing.Surge(floor, m.s.Utilisation(p.tier, m.now))
	if price > p.price {
		m.declined++
		return
	}
	if floor > o.FloorFor(p.tier, start, 0) || price > floor {
		m.peak++
	}
	plan, err := m.s.Plan(p.gpus, p.tier, Span{start, start.Add(p.dur)}, m.now)
	if err != nil {
		if !errors.Is(err, ErrBusy) {
			panic(err)
		}
		m.declined++
		return
	}
	m.pool = append(m.pool, simJob{p: p, gpus: plan, idx: int32(len(m.order)), lease: auction.Lease{
		JobID: p.id, Renter: p.renter, Tier: p.tier, Price: price, GPUs: p.gpus,
		Start: start.Unix(), End: start.Add(p.dur).Unix(), NoticeSec: 60, BillingSec: p.billing}})
	j := &m.pool[len(m.pool)-1]
	j.l = &j.lease
	acts, err := m.s.Claim(j.l, plan, m.now)
	if err != nil {
		panic(fmt.Sprintf("claim %s of its own plan %v: %v", p.id, plan, err))
	}
	m.jobs[p.id] = j
	m.order = append(m.order, j)
	m.do(acts)
	if !p.noStart {
		m.after(50*time.Millisecond, evStart, j.idx)
	}
}

// pay sends the renter's next voucher: a cumulative total in credits.
func (m *sim) pay(j *simJob) {
	j.paid++
	if err := m.s.PaidTotal(j.p.id, IntervalPrice(j.l)*auction.Credits(j.paid)); err != nil {
		panic(err)
	}
	if j.p.pays < 0 || j.paid < j.p.pays {
		next := j.runAt.Add(time.Duration(int64(j.paid)*j.p.billing)*time.Second + j.p.payLate)
		m.after(next.Sub(m.now), evVoucher, j.idx)
	}
}

func (m *sim) release(j *simJob) {
	if j.releases++; j.releases > 1 {
		return // counted; the checks fail it
	}
	acts := m.s.Release(j.p.id, m.now)
	for g := range m.occupied {
		m.occupied[g] = slices.DeleteFunc(m.occupied[g], func(x *simJob) bool { return x == j })
	}
	m.do(acts)
}

// do carries out the scheduler's actions.
func (m *sim) do(acts []Action) {
	for _, a := range acts {
		j := m.jobs[a.JobID]
		m.kinds[a.Kind]++
		if j.releases > 0 {
			j.afterRelease++
		}
		if a.Kind.Ends() {
			j.endings++
			if j.ending == 0 {
				j.ending, j.endAt = a.Kind, m.now
			}
		}
		switch a.Kind {
		case Launch:
			j.launches++
			j.launchAt = m.now
			if !slices.ContainsFunc(j.gpus, func(g int) bool { return len(m.occupied[g]) != 0 }) {
				j.launchOK++
			}
			for _, g := range j.gpus {
				m.occupied[g] = append(m.occupied[g], j)
			}
			m.after(simPull, evRunning, j.idx)
		case Pause:
			j.paused, j.pausedAt = true, m.now
			j.pauses = append(j.pauses, m.now)
		case Resume:
			j.paused, j.pauseMax = false, max(j.pauseMax, m.now.Sub(j.pausedAt))
		case Expire:
			m.after(0, evRelease, j.idx)
		case StopUnpaid, StopAtEnd:
			m.after(simStop, evRelease, j.idx)
		case Preempt:
			m.reasons[a.Reason]++
			if j.running {
				m.after(a.Notice/2, evRelease, j.idx) // it checkpoints and exits inside its notice
			} else {
				m.after(0, evRelease, j.idx)
			}
		}
	}
}
