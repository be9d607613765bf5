package services

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The seams the node's own tests reach the renter's services by: each
// stands in for a field or function a test of the whole node used when
// this code was part of it. Nothing outside tests calls them.

// InjectReadyGrace shortens how long past readiness.initial_delay a
// running replica may go without being ready (service.SettleMax).
func (s *Manager) InjectReadyGrace(d time.Duration) { s.readyGrace = d }

// InjectHealStep shortens the first wait of healing's back-off
// (service.SyncEvery).
func (s *Manager) InjectHealStep(d time.Duration) { s.healStep = d }

// CancelJobs cancels the jobs ids as a service going down cancels its
// replicas: in the renter's records, and on their providers, told again
// a few times when they were not reached.
func (s *Manager) CancelJobs(ids []string) { s.cancelJobs(ids) }

// ReplicaSpec is replica i's own spec, as the service buys it.
func ReplicaSpec(spec *auction.JobSpec, i int, now time.Time) ([]byte, error) {
	return replicaSpec(spec, i, now)
}
