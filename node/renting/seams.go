package renting

import (
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
)

// The seams the node's own tests reach the renter's jobs by: each stands
// in for a field a test of the whole node set when this code was part of
// it. Nothing outside tests calls them.

// InjectBeforeStart is fault injection: f is called with the job and
// provider before a lease's first start is sent, so that a test can have
// the provider give the award away first.
func (r *Jobs) InjectBeforeStart(f func(jobID, provider string)) { r.beforeStart = f }

// InjectReattachFor replaces how long the renter comes back to a lost
// provider (renter.ReattachFor, and renter.ReserveRetry for a
// reservation), so that a test can see a run outlive the bound from its
// first loss without waiting minutes; 0 restores them.
func (r *Jobs) InjectReattachFor(d time.Duration) { r.reattachFor = d }

// InjectRTT replaces where the auctioneer reads a provider's known RTT
// (the peerstore's average), so that a test can make it unknown and have
// the auction measure it.
func (r *Jobs) InjectRTT(f func(provider string) (time.Duration, bool)) { r.rtt = f }

// Auctioneer is the auctioneer this renter's jobs are placed by, for a
// test that runs a round directly.
func (r *Jobs) Auctioneer() *renter.Auctioneer { return r.auc }

// QuoteTransport is the auctioneer's transport (quotes and awards over
// this node's streams), for a benchmark of the quote exchange alone.
func (r *Jobs) QuoteTransport() renter.Transport { return auctionTransport{r} }

// Hold puts recs in memory as jobs of this renter, with their retained
// logs (by job ID; a job without one holds an empty log), replacing any
// record of the same ID: neither saved nor followed. For tests and
// benchmarks of what reads the jobs (metrics, services' figures and logs).
func (r *Jobs) Hold(recs []JobRecord, logs map[string][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range recs {
		r.jobs[j.ID] = &j
		if _, ok := r.logs[j.ID]; !ok || logs[j.ID] != nil {
			r.logs[j.ID] = &jobLog{data: logs[j.ID]}
		}
	}
}
