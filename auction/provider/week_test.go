package provider

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A week of one provider's jobs in virtual time, checked: every lease
// ends exactly once and gets no action after its release; a job launches
// once, on GPUs nobody else occupies; silver and gold are never
// preempted; renters who stop paying are paused at the grace and stopped
// exactly a patience later; renters who pay are never paused.
func TestProviderWeek(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		w := newWorkload(seed)
		began := time.Now()
		m := runWeek(w)
		took := time.Since(began)
		if took > time.Second {
			t.Errorf("seed %d: a week took %v, want well under a second", seed, took)
		}
		checkWeek(t, m)
		t.Logf("seed %d: %v for %d leases (%d declined, %d at peak prices); actions %v; preemptions %v",
			seed, took, len(m.order), m.declined, m.peak, m.kinds, m.reasons)
	}
}

func checkWeek(t *testing.T, m *sim) {
	t.Helper()
	unpaidStopped, paidRan, reservations := 0, 0, 0
	for _, j := range m.order {
		id, l := j.p.id, j.l
		if j.releases != 1 || j.endings > 1 || j.afterRelease != 0 {
			t.Errorf("%s: released %d times, %d ending actions, %d actions after release", id, j.releases, j.endings, j.afterRelease)
		}
		if st, ok := m.s.Ended(id); !ok || (st != Ended && st != Expired) || (st == Expired) != (j.ending == Expire) {
			t.Errorf("%s: ended as %q (%v), ending action %s", id, st, ok, j.ending)
		}
		if j.ending == 0 && !j.exited {
			t.Errorf("%s: released without an ending or an exit", id)
		}
		if j.launches > 1 || j.launchOK != j.launches {
			t.Errorf("%s: %d launches, %d on free GPUs", id, j.launches, j.launchOK)
		}
		if j.ending == Preempt && l.Tier != auction.Bronze {
			t.Errorf("%s: %s preempted", id, l.Tier)
		}
		if (j.p.noStart || j.refused) != (j.ending == Expire) {
			t.Errorf("%s: never started %v, start refused %v, expired %v", id, j.p.noStart, j.refused, j.ending == Expire)
		}
		if j.refused && l.Tier != auction.Bronze {
			t.Errorf("%s: a %s start refused as inside its notice", id, l.Tier)
		}
		if l.Tier == auction.Gold && j.running {
			reservations++
			if j.runAt.Before(time.Unix(l.Start, 0)) {
				t.Errorf("%s: a reservation ran at %v, before its start %v", id, j.runAt, time.Unix(l.Start, 0))
			}
		}
		// Backfill never delays a reservation: it launches at its start,
		// or as soon as a lease that ran to its own end has stopped.
		if start := time.Unix(l.Start, 0); l.Tier == auction.Gold && !j.p.noStart && start.After(t0.Add(j.p.arrive)) {
			if late := j.launchAt.Sub(start); j.launches != 1 || late < 0 || late > simStop {
				t.Errorf("%s: a reservation for %v launched %v late (%d launches)", id, start, late, j.launches)
			}
		}
		if !j.running {
			continue
		}
		grace, patience := Grace(l), Patience(l)
		if j.p.pays < 0 {
			paidRan++
			if len(j.pauses) != 0 || j.ending == StopUnpaid || j.pauseMax > grace {
				t.Errorf("%s paid every voucher yet was paused at %v (ending %s)", id, j.pauses, j.ending)
			}
			continue
		}
		covered := time.Duration(int64(j.p.pays)*l.BillingSec) * time.Second
		pauseAt := j.runAt.Add(covered + grace + time.Nanosecond)
		if j.ending != StopUnpaid {
			// It ended (its lease's end, a preemption, its own exit) before
			// its patience ran out.
			if j.endAt.After(pauseAt.Add(patience + time.Nanosecond)) {
				t.Errorf("%s stopped paying after %d vouchers yet ran until %v", id, j.p.pays, j.endAt.Sub(j.runAt))
			}
			continue
		}
		unpaidStopped++
		if len(j.pauses) != 1 || !j.pauses[0].Equal(pauseAt) || !j.endAt.Equal(pauseAt.Add(patience+time.Nanosecond)) {
			t.Errorf("%s: paused at %v, stopped at %v; want %v and a patience (%v) later",
				id, j.pauses, j.endAt.Sub(j.runAt), pauseAt.Sub(j.runAt), patience)
		}
	}
	if n := len(m.s.Leases(m.now)); n != 0 || len(m.s.Commitments(m.now)) != 0 {
		t.Errorf("%d leases still active after the week", n)
	}
	// The week must have exercised what it claims to check.
	for k := Launch; k <= StopAtEnd; k++ {
		if k != Resume && m.kinds[k] == 0 {
			t.Errorf("no %s all week", k)
		}
	}
	for _, r := range []string{ReasonHigherTier, ReasonReclaimed, ReasonWindowEnd, ReasonReserved} {
		if m.reasons[r] == 0 {
			t.Errorf("no preemption because %s", r)
		}
	}
	if m.peak == 0 || m.peak == len(m.order) {
		t.Errorf("%d of %d leases priced above the base floor: the peaks were not exercised", m.peak, len(m.order))
	}
	if unpaidStopped == 0 || paidRan == 0 || reservations == 0 {
		t.Errorf("%d unpaid stopped, %d paid ran, %d reservations ran: the week is too quiet", unpaidStopped, paidRan, reservations)
	}
}

// BenchmarkProviderWeek runs one provider's week per iteration: about 200
// leases quoted at peak and surge prices, with gold reservations, bronze
// backfill of the gaps before them, preemption, reclaims, window ends and
// billing.
func BenchmarkProviderWeek(b *testing.B) {
	w, m := newWorkload(1), new(sim)
	b.ReportAllocs()
	for b.Loop() {
		m.run(w)
	}
	leases := len(m.order)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "provider-weeks/s")
	b.ReportMetric(float64(leases), "leases/week")
}
