package node

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

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

// spentOnJob is what the renter has spent on job id (0: no such job).
func (r *renterJobs) spentOnJob(id string) auction.Credits {
	j, err := r.get(id)
	if err != nil {
		return 0
	}
	return jobSpent(j)
}

// spentOnService is what the renter has spent on service name's replica
// jobs: every job recorded as one of its replicas (JobRecord.Service: up,
// healing and scaling all submit with it) created since the service went
// up, so that the replicas replaced, scaled away or cancelled count too. A
// job of an earlier service of the same name (created before since) does
// not.
func (r *renterJobs) spentOnService(name string, since time.Time) auction.Credits {
	var sum auction.Credits
	for _, j := range r.snapshot(func(j *JobRecord) bool { return j.Service == name && !j.Created.Before(since) }) {
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

// serviceCost is the gateway.Config.Cost hook of rec's service. It takes
// renterJobs.mu only, never services.mu: the gateway's Stats (which calls
// it) is read by service_status while services.mu may be held elsewhere.
func (s *services) serviceCost(rec *ServiceRecord) func() auction.Credits {
	name, since := rec.Name, rec.Created.Add(-time.Second) // a clock step back at submit must not lose the first replicas
	return func() auction.Credits { return s.n.renterJobs.spentOnService(name, since) }
}

// replicaCost is the gateway.Replica.Cost hook of replica job id.
func (s *services) replicaCost(id string) func() auction.Credits {
	return func() auction.Credits { return s.n.renterJobs.spentOnJob(id) }
}
