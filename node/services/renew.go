package services

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/renting"
)

// Make-before-break renewal (docs/SERVICES.md, "A lease's end") is
// decided by the service's reconciler (auction/service, renew.go); here
// is the node's part: a replica whose successor took its index is
// retired (drained, then cancelled), and kept in the record's Retiring
// until it is, so that a renter restarted mid-renewal does not leave an
// old job running to its end.

// jobLease reads a job's current lease; nil when it has none readable.
func jobLease(j *renting.JobRecord) *auction.Lease {
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

// retire drains old (a replica whose successor took its index) from the
// gateway, waiting at most until its lease ends for the requests in
// flight on it, then cancels its job and forgets it in the record.
func (s *Manager) retire(ctx context.Context, name string, gw *gateway.Gateway, old string) {
	limit := 2 * time.Minute // the gateway's idle bound inside a body
	if j, err := s.jobs.Get(old); err == nil {
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
func (s *Manager) forgetRetired(name, old string) {
	s.mu.Lock()
	rec := s.recs[name]
	if rec == nil || !slices.Contains(rec.Retiring, old) {
		s.mu.Unlock()
		return
	}
	rec.Retiring = slices.DeleteFunc(slices.Clone(rec.Retiring), func(id string) bool { return id == old })
	if len(rec.Retiring) == 0 {
		rec.Retiring = nil
	}
	s.mu.Unlock()
	if err := s.save(name); err != nil {
		s.log.Error("service record not saved", "service", name, "err", err)
	}
}
