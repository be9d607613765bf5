package providing

import (
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
)

// Newcomers (auction/provider/newcomer.go): a renter that has never paid
// this provider cannot hold its GPUs with awards it never starts. The
// scheduler decides; this file tells it, at start, who has paid, and
// carries out a displacement before the award that caused it.

// loadEstablished tells the scheduler which renters have paid this
// provider, from the lease records it keeps anyway: a record keeps the
// best voucher of its run once that voucher pays for a billing interval
// (saveVoucher), exactly when the scheduler establishes the renter
// (Scheduler.PaidTotal). An award that expired unstarted later makes its
// renter a newcomer again, as it does while running. The records are
// walked in the order they were last written, so that the scheduler's
// bound (MaxEstablished) keeps the most recent payers.
func (pj *Provider) loadEstablished() {
	type event struct {
		at     time.Time
		renter string
		paid   bool
	}
	var evs []event
	err := pj.store.ForEach(func(_ string, raw []byte) error {
		rec, err := ReadRecord(raw)
		if err != nil {
			return nil
		}
		switch {
		case len(rec.Voucher) > 0:
			// Our own record of a voucher the meter checked: its signature
			// need not be checked again.
			if v, err := ledger.ReadVoucher(rec.Voucher); err == nil && v.Total > 0 {
				evs = append(evs, event{rec.Updated, v.Renter, true})
			}
		case rec.State == LeaseExpired:
			if l, _, err := auction.ReadLease(rec.Lease); err == nil {
				evs = append(evs, event{rec.Updated, l.Renter, false})
			}
		}
		return nil
	})
	if err != nil {
		pj.log.Warn("established renters not read from the lease records; all are newcomers", "err", err)
		return
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	last := map[string]int{} // renter -> its last event's index
	for i, e := range evs {
		last[e.renter] = i
	}
	n := 0
	for i, e := range evs {
		if e.paid && last[e.renter] == i {
			pj.sched.Establish(e.renter)
			n++
		}
	}
	if n > 0 {
		pj.log.Info("renters with a paying history", "count", min(n, sched.MaxEstablished))
	}
}

// displace ends the newcomers' awards that the award of l on gpus may
// take (Scheduler.Displace), each settled (charging nothing) and freed
// before l is claimed and journaled: in this node's feed the displaced
// lease is closed before the next one on its GPUs is signed, as every
// node's fraud scan requires of an exclusive lease.
func (pj *Provider) displace(l *auction.Lease, gpus []int, now time.Time) {
	pj.do(pj.sched.Displace(l, gpus, now))
}

// maxGraceWait bounds awaitGrace: well inside the award stream's 10 s.
const maxGraceWait = 5 * time.Second

// awaitGrace holds an award that only newcomers' awards in their grace
// stand in the way of until that grace ends, rather than refuse it as
// raced at once: an honest newcomer then gets the GPUs of an award that
// is never started, however the attacker's awards fall between its
// renter's quick re-quotes (a few, within about two seconds). It stops
// waiting as soon as one of those awards starts or goes, and is done
// before accept queues the award, so that it holds up no other award.
func (pj *Provider) awaitGrace(l *auction.Lease, gpus []int) {
	deadline := time.Now().Add(maxGraceWait)
	for {
		until := pj.sched.GraceEnds(l, gpus, time.Now())
		if until.IsZero() || until.After(deadline) {
			return
		}
		select {
		case <-pj.bg.Done():
			return
		case <-time.After(min(time.Until(until), 100*time.Millisecond)):
		}
	}
}

// SetNewcomerGrace changes the newcomer rule's grace (see
// auction/provider.WithNewcomerGrace; d < 0 turns the rule off), for
// the awards made from now on.
func (pj *Provider) SetNewcomerGrace(d time.Duration) { pj.sched.SetNewcomerGrace(d) }

// Established reports whether renter has paid this provider (see
// auction/provider.Scheduler.Establish).
func (pj *Provider) Established(renter string) bool { return pj.sched.Established(renter) }
