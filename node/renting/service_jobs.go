package renting

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The jobs bought for services (JobRecord.Service): which still live, and
// what they cost.

// LiveServiceJobs is every job bought for a service (JobRecord.Service)
// that has not ended.
func (r *Jobs) LiveServiceJobs() []JobRecord {
	return r.Snapshot(func(j *JobRecord) bool { return j.Service != "" && !Terminal(j.State) })
}

// What a service costs its renter (docs/SERVICES.md, "Live figures and
// cost"), for the gateway's Spent, cost per 1,000 requests and per
// million tokens. A replica job's spend is read from its record, as
// spentLeases reads it when no settlement has come yet: the provider's
// reported charge of the current run when it is within this node's bound
// (BilledLease is the current lease, not disputed), else what this node
// promised in the run's vouchers (Paid, the most the provider can take).
// A record keeps its current run only: what earlier runs of a re-auctioned
// replica cost is in `gleaner spend`, by lease.

// jobSpent is what the renter has spent on j's current run.
func jobSpent(j *JobRecord) auction.Credits {
	if j.Charged != nil && !j.ChargeDisputed && j.BilledLease != "" && j.BilledLease == j.LeaseCID {
		return *j.Charged
	}
	return j.Paid
}

// SpentOnJob is what the renter has spent on job id (0: no such job).
func (r *Jobs) SpentOnJob(id string) auction.Credits {
	j, err := r.Get(id)
	if err != nil {
		return 0
	}
	return jobSpent(j)
}

// SpentOnService is what the renter has spent on service name's replica
// jobs: every job recorded as one of its replicas (JobRecord.Service: up,
// healing and scaling all submit with it) created since the service went
// up, so that the replicas replaced, scaled away or cancelled count too. A
// job of an earlier service of the same name (created before since) does
// not.
func (r *Jobs) SpentOnService(name string, since time.Time) auction.Credits {
	var sum auction.Credits
	for _, j := range r.Snapshot(func(j *JobRecord) bool { return j.Service == name && !j.Created.Before(since) }) {
		sum = addCredits(sum, jobSpent(&j))
	}
	return sum
}

// addCredits is a+b, saturating rather than wrapping; a negative amount
// (none is recorded) counts as 0.
func addCredits(a, b auction.Credits) auction.Credits {
	if b <= 0 {
		return a
	}
	if a > auction.Credits(1<<63-1)-b {
		return auction.Credits(1<<63 - 1)
	}
	return a + b
}
