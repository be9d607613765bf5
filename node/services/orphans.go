package services

import (
	"slices"

	"github.com/gleaner-net/gleaner/node/renting"
)

// A service's jobs are bought (by up, healing, scaling and renewal)
// before the record that holds them is saved, and a service going down
// deletes its record before it cancels its jobs; a replica scaled away
// leaves the record before its job is cancelled. A renter that stops in
// between leaves jobs that no record holds: no gateway routes to them,
// no keeper heals, renews or retires them, yet their providers would run
// them, paid, to their leases' ends. resume cancels them (cancelOrphans;
// renting.Jobs.LiveServiceJobs lists the live ones).

// serviceOrphans is the IDs, sorted, of the jobs among live that no
// record in recs holds as a replica, a successor or a job being retired.
func serviceOrphans(recs map[string]*ServiceRecord, live []renting.JobRecord) []string {
	held := map[string]bool{}
	for _, rec := range recs {
		for _, ids := range [][]string{rec.Replicas, successors(rec), rec.Retiring} {
			for _, id := range ids {
				held[id] = true
			}
		}
	}
	var out []string
	for _, j := range live {
		if !held[j.ID] {
			out = append(out, j.ID)
		}
	}
	slices.Sort(out)
	return out
}

// cancelOrphansLocked cancels, in the background, the jobs of live (the
// live service jobs, read before s.mu was taken) that no record holds. It
// runs in resume with s.mu held, before any keeper (which takes s.mu
// first) can buy a job that its record does not hold yet.
func (s *Manager) cancelOrphansLocked(live []renting.JobRecord) {
	orphans := serviceOrphans(s.recs, live)
	if len(orphans) == 0 {
		return
	}
	s.log.Warn("service jobs that no service holds (this node stopped between buying or dropping them and saving the service): cancelling them", "jobs", orphans)
	go s.cancelJobs(orphans)
}
