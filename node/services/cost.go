package services

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// What a service costs its renter: node/renting/service_jobs.go reckons
// it from the replica jobs' records.

// serviceCost is the gateway.Config.Cost hook of rec's service. It takes
// the renter's jobs' lock only, never services.mu: the gateway's Stats (which calls
// it) is read by service_status while services.mu may be held elsewhere.
func (s *Manager) serviceCost(rec *ServiceRecord) func() auction.Credits {
	name, since := rec.Name, rec.Created.Add(-time.Second) // a clock step back at submit must not lose the first replicas
	return func() auction.Credits { return s.jobs.SpentOnService(name, since) }
}

// replicaCost is the gateway.Replica.Cost hook of replica job id.
func (s *Manager) replicaCost(id string) func() auction.Credits {
	return func() auction.Credits { return s.jobs.SpentOnJob(id) }
}
