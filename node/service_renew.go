package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
)

// Make-before-break renewal (docs/SERVICES.md, "A lease's end"): each
// replica's job runs for its lease, the spec's duration.max, and is then
// stopped by its provider. A service must outlive its leases without a
// gap, so when a ready replica's lease is within renewMargin of its end
// the keeper buys a successor for the same index (its replicaSpec, a
// member of the service's auction group, so on a provider none of the
// live replicas, the old one included, is on). Once the successor is
// ready in the gateway it takes the index; the old replica is drained
// (out of the gateway at once, the requests in flight on it answered) and
// its job cancelled, which ends its billing with the interval in
// progress. A successor that fails is dropped: the old replica serves to
// its end, and healing replaces it then. A successor still loading when
// the old lease ends takes the index as its replacement (it was bought
// for that), under healing's rules.
//
// The pending successors are kept in the ServiceRecord (Renewing), and
// the drained jobs not yet cancelled too (Retiring), so that a renter
// restarted mid-renewal neither loses a successor (paid for) nor buys a
// second one, nor leaves an old job running to its end.

// renewAllowance is what a successor needs beyond readiness.initial_delay
// to take over: an auction (a few seconds of quotes and sealed bids), the
// container's start with the image cached, and slack for one failed
// auction to be run again.
const renewAllowance = 60 * time.Second

// renewMargin is how long before its lease's end a replica gets its
// successor: readiness.initial_delay plus renewAllowance, but at most half
// the lease, so that a short lease is renewed in its second half rather
// than as soon as it starts (a lease shorter than the margin would
// otherwise be renewed at once, forever).
func renewMargin(initialDelay, lease time.Duration) time.Duration {
	return max(min(initialDelay+renewAllowance, lease/2), 0)
}

// replicaLease is what the renewal decision needs to know of a replica.
type replicaLease struct {
	Running    bool      // its job runs
	EverReady  bool      // it has passed its readiness check
	Start, End time.Time // its current lease; End zero when unknown
	Renewing   bool      // a successor is already bought
	Tried      bool      // a successor was bought for this lease and failed
}

// renewDue says whether replica r gets a successor at now, and why (for
// the log).
func renewDue(now time.Time, r replicaLease, initialDelay time.Duration) (bool, string) {
	if !r.Running || !r.EverReady || r.Renewing || r.Tried || r.End.IsZero() || !now.Before(r.End) {
		return false, ""
	}
	margin := renewMargin(initialDelay, r.End.Sub(r.Start))
	if left := r.End.Sub(now); left > margin {
		return false, ""
	}
	return true, fmt.Sprintf("its lease ends at %s, in %s (renewed %s ahead: readiness.initial_delay %s + %s, at most half the lease)",
		r.End.UTC().Format(time.RFC3339), r.End.Sub(now).Round(time.Second), margin, initialDelay, renewAllowance)
}

// jobLease reads a job's current lease; nil when it has none readable.
func jobLease(j *JobRecord) *auction.Lease {
	if len(j.Lease) == 0 {
		return nil
	}
	l, _, err := auction.DecodeLeaseUnverified(j.Lease)
	if err != nil {
		return nil
	}
	return l
}

// successors are the pending successors' job IDs, sorted.
func successors(rec *ServiceRecord) []string {
	return slices.Sorted(maps.Values(rec.Renewing))
}

// renewSettle hands each index whose successor is ready (or whose old job
// has ended) to the successor, and drops successors that failed. It runs
// in sync with s.mu held and before healing, so that healing sees the
// successor at the index. It returns the old jobs to drain and cancel
// (retire) and those that ended (drop), and whether rec changed.
func (k *keeper) renewSettle(rec *ServiceRecord, reps []string, notes map[string]string, ready map[string]bool) (retire, drop []string, changed bool) {
	s := k.s
	group := s.n.renterJobs.auctionGroup(serviceGroup(k.name))
	for i, id := range reps {
		succ := rec.Renewing[id]
		if succ == "" {
			continue
		}
		sj, err := s.n.renterJobs.get(succ)
		if err != nil || terminal(sj.State) {
			why := "its job is gone"
			if err == nil {
				why = "its job ended " + sj.State
				if sj.Error != "" {
					why += ": " + sj.Error
				}
			}
			s.log.Warn("service renewal failed: the replica serves to its lease's end, then is healed", "service", k.name, "index", i, "job", id, "successor", succ, "why", why)
			delete(rec.Renewing, id)
			drop = append(drop, succ) // out of the gateway, if it got there
			changed = true
			continue
		}
		oj, oerr := s.n.renterJobs.get(id)
		ended := oerr != nil || terminal(oj.State)
		if !ready[succ] && !ended {
			continue
		}
		why := "ready before the lease's end"
		if ended {
			why = "its lease ended before the successor was ready"
		}
		s.log.Info("service replica renewed", "service", k.name, "index", i, "old", id, "new", succ, "why", why)
		notes[succ] = fmt.Sprintf("renews %s (replica %d): %s", id, i, why)
		delete(notes, id)
		delete(rec.Renewing, id)
		reps[i] = succ
		group.Release(id)
		rec.Renewed++
		changed = true
		if ended {
			drop = append(drop, id)
		} else {
			retire = append(retire, id)
			rec.Retiring = append(rec.Retiring, id)
		}
	}
	return retire, drop, changed
}

// renewStart buys a successor for each replica of reps that is due
// (renewDue). It runs in sync with s.mu held, after healing and scaling.
func (k *keeper) renewStart(rec *ServiceRecord, reps []string, now time.Time) (changed bool) {
	s := k.s
	if rec.HealError != "" {
		return false
	}
	seen := map[string]bool{} // the current leases' CIDs, to prune the caches by
	for i, id := range reps {
		j, err := s.n.renterJobs.get(id)
		if err != nil {
			continue
		}
		r := replicaLease{Running: j.State == StateRunning, EverReady: k.everReady[id], Renewing: rec.Renewing[id] != ""}
		if span, ok := k.leaseSpan(j); ok {
			seen[j.LeaseCID] = true
			r.Start, r.End = span[0], span[1]
			r.Tried = k.renewTried[j.LeaseCID]
		}
		due, why := renewDue(now, r, k.spec.Service.Readiness.InitialDelay)
		if !due {
			continue
		}
		k.renewTried[j.LeaseCID] = true
		y, err := replicaSpec(k.spec, i, now)
		var nj *JobRecord
		if err == nil {
			nj, err = s.n.renterJobs.submit(y, nil, SubmitOptions{Service: k.name})
		}
		if err != nil {
			s.log.Warn("service renewal not bought: the replica serves to its lease's end, then is healed", "service", k.name, "index", i, "job", id, "err", err)
			continue
		}
		s.log.Info("service replica renewing", "service", k.name, "index", i, "job", id, "successor", nj.ID, "why", why)
		if rec.Renewing == nil {
			rec.Renewing = map[string]string{}
		}
		rec.Renewing[id] = nj.ID
		changed = true
	}
	// A lease no replica holds any more is not looked at again.
	maps.DeleteFunc(k.leaseSpans, func(cid string, _ [2]time.Time) bool { return !seen[cid] })
	maps.DeleteFunc(k.renewTried, func(cid string, _ bool) bool { return !seen[cid] })
	return changed
}

// leaseSpan is the start and end of j's current lease, decoded once per
// lease (by its CID) rather than on every sync; false when it has none
// readable.
func (k *keeper) leaseSpan(j *JobRecord) ([2]time.Time, bool) {
	if j.LeaseCID == "" {
		return [2]time.Time{}, false
	}
	if span, ok := k.leaseSpans[j.LeaseCID]; ok {
		return span, true
	}
	l := jobLease(j)
	if l == nil {
		return [2]time.Time{}, false
	}
	if k.leaseSpans == nil {
		k.leaseSpans = map[string][2]time.Time{}
	}
	span := [2]time.Time{time.Unix(l.Start, 0), time.Unix(l.End, 0)}
	k.leaseSpans[j.LeaseCID] = span
	return span, true
}

// retire drains old (a replica whose successor took its index) from the
// gateway, waiting at most until its lease ends for the requests in
// flight on it, then cancels its job and forgets it in the record.
func (s *services) retire(ctx context.Context, name string, gw *gateway.Gateway, old string) {
	limit := 2 * time.Minute // the gateway's idle bound inside a body
	if j, err := s.n.renterJobs.get(old); err == nil {
		if l := jobLease(j); l != nil {
			limit = min(limit, max(time.Until(time.Unix(l.End, 0)), 0))
		}
	}
	dctx, cancel := context.WithTimeout(ctx, limit)
	if !gw.Drain(dctx, old) {
		s.log.Info("service replica cancelled with requests in flight", "service", name, "job", old)
	}
	cancel()
	s.cancelJobs([]string{old})
	s.forgetRetired(name, old)
}

// forgetRetired drops old from the record's Retiring once it is cancelled.
func (s *services) forgetRetired(name, old string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.recs[name]
	if rec == nil || !slices.Contains(rec.Retiring, old) {
		return
	}
	rec.Retiring = slices.DeleteFunc(slices.Clone(rec.Retiring), func(id string) bool { return id == old })
	if len(rec.Retiring) == 0 {
		rec.Retiring = nil
	}
	c := *rec
	if err := s.n.store.Update(func(tx *StoreTx) error { return tx.Put(bucketServices, c.Name, &c) }); err != nil {
		s.log.Error("service record not saved", "service", name, "err", err)
	}
}

// withoutSuccessors is st without the pending successors' figures: the
// autoscaler counts the service's replicas, and a successor is not
// capacity being added (it replaces one), so it neither holds the
// autoscaler while it loads nor counts as a ready replica once it is.
func withoutSuccessors(st gateway.Stats, rec *ServiceRecord) gateway.Stats {
	if len(rec.Renewing) == 0 {
		return st
	}
	succ := map[string]bool{}
	for _, id := range rec.Renewing {
		succ[id] = true
	}
	st.Replicas = slices.DeleteFunc(slices.Clone(st.Replicas), func(r gateway.ReplicaStats) bool { return succ[r.ID] })
	return st
}
