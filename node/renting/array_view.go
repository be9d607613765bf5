package renting

import (
	"fmt"
	"sort"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// ArrayView is an array's progress as job_status shows it, on the
// JobRecord whose ID is the array's.
type ArrayView struct {
	Shards       int             `json:"shards"`
	MaxParallel  int             `json:"max_parallel"`
	Done         int             `json:"done"`
	Running      int             `json:"running"`      // in flight, leased or starting
	Auction      int             `json:"auction"`      // in flight, in a first auction
	Reauctioning int             `json:"reauctioning"` // in flight, auctioned again (preempted, provider lost)
	Waiting      int             `json:"waiting"`      // not yet submitted (max_parallel)
	Failed       int             `json:"failed"`       // failed for good, or stopped with the array
	Retries      int             `json:"retries"`      // shard jobs beyond each shard's first
	Spent        auction.Credits `json:"spent" doc:"micro-credits (auction.Credits) spent on every shard job so far"`
	Reason       string          `json:"reason,omitempty"`
	// ETASeconds is how long until every shard is done, estimated from
	// the done shards' times (renter.ArrayETA); absent until a shard has
	// finished and once the array has ended.
	ETASeconds *int64      `json:"eta_s,omitempty"`
	ShardJobs  []ShardView `json:"shard_jobs"`
}

// ShardView is one shard's current (or last) job.
type ShardView struct {
	Index    int    `json:"index"`
	Phase    string `json:"phase"`
	Job      string `json:"job,omitempty"`
	State    string `json:"state,omitempty"`
	Provider string `json:"provider,omitempty"`
	Attempts int    `json:"attempts"`
	Outputs  string `json:"outputs,omitempty"`
	// Input and Files: with array.split, the directory of the shard's
	// files that its spec names in the split input's place, and how many.
	Input string `json:"input,omitempty"`
	Files int    `json:"files,omitempty"`
}

// Line is the progress in one line, as `gleaner job status` prints it.
func (v *ArrayView) Line() string {
	line := fmt.Sprintf("%d/%d done, %d running, %d re-auctioning, %d failed; spent %s credits",
		v.Done, v.Shards, v.Running+v.Auction, v.Reauctioning, v.Failed, auction.FormatCredits(v.Spent))
	if v.ETASeconds != nil {
		line += "; ETA " + renter.FormatETA(time.Duration(*v.ETASeconds)*time.Second)
	}
	return line
}

// arrayView is the JobRecord that stands for run's array: its state,
// spec and progress.
func (r *Jobs) arrayView(run *arrayRun) *JobRecord { return r.arrayViewAt(run, time.Now()) }

// arrayViewAt is arrayView as of now, which the ETA is reckoned from.
func (r *Jobs) arrayViewAt(run *arrayRun, now time.Time) *JobRecord {
	run.mu.Lock()
	snap, rec := run.a.Snapshot(), run.rec
	run.mu.Unlock()
	v := &ArrayView{Shards: rec.Shards, MaxParallel: rec.MaxParallel, Reason: snap.Reason}
	var took, ages []time.Duration // done shards' times, in-flight shards' ages
	r.mu.Lock()
	for _, j := range r.jobs {
		if j.Array == rec.ID {
			v.Spent = addCredits(v.Spent, jobSpent(j))
		}
	}
	for i, sh := range snap.Shards {
		sv := ShardView{Index: i, Phase: sh.Phase, Job: sh.Job, Attempts: sh.Attempts}
		if i < len(rec.Split) {
			sv.Input, sv.Files = rec.Split[i].CID, rec.Split[i].Files
		}
		if sh.Attempts > 1 {
			v.Retries += sh.Attempts - 1
		}
		if j := r.jobs[sh.Job]; j != nil {
			sv.State, sv.Provider, sv.Outputs = j.State, j.Provider, j.Outputs
		}
		if j := r.jobs[sh.Job]; j != nil {
			switch sh.Phase {
			case renter.ShardDone:
				end := j.Updated
				if j.EndedAt != nil {
					end = *j.EndedAt
				}
				took = append(took, end.Sub(j.Created))
			case renter.ShardInFlight:
				ages = append(ages, now.Sub(j.Created))
			}
		}
		switch sh.Phase {
		case renter.ShardDone:
			v.Done++
		case renter.ShardPending:
			v.Waiting++
		case renter.ShardFailed:
			v.Failed++
		case renter.ShardInFlight:
			j := r.jobs[sh.Job]
			switch {
			case j != nil && j.State == StateAuction && (j.Life != nil || sh.Attempts > 1):
				v.Reauctioning++
			case j == nil || j.State == StateAuction:
				v.Auction++
			default:
				v.Running++
			}
		}
		v.ShardJobs = append(v.ShardJobs, sv)
	}
	r.mu.Unlock()
	sort.Slice(v.ShardJobs, func(a, b int) bool { return v.ShardJobs[a].Index < v.ShardJobs[b].Index })
	state := snap.State
	if eta, ok := renter.ArrayETA(took, ages, v.Waiting, rec.MaxParallel); ok && state == renter.ArrayRunning {
		secs := int64((eta + time.Second - 1) / time.Second)
		v.ETASeconds = &secs
	}
	j := &JobRecord{ID: rec.ID, Name: rec.Name, State: state, Spec: rec.Spec, Created: rec.Created, Updated: rec.Updated,
		EndedAt: rec.EndedAt, Error: snap.Reason, Paid: v.Spent, ArrayView: v}
	return j
}

// ArrayShardJob is the job of shard i of array id (its current or last
// attempt), for `job logs ID --shard i`.
func (r *Jobs) ArrayShardJob(id string, i int) (string, error) {
	run := r.arrayOf(id)
	if run == nil {
		return "", fmt.Errorf("no job array %q", id)
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	snap := run.a.Snapshot()
	if i < 0 || i >= len(snap.Shards) {
		return "", fmt.Errorf("array %s has shards 0..%d, not %d", id, len(snap.Shards)-1, i)
	}
	if snap.Shards[i].Job == "" {
		return "", fmt.Errorf("shard %d of %s has not been submitted yet", i, id)
	}
	return snap.Shards[i].Job, nil
}

// Arrays are the views of every job array, without their shards' rows
// (job_list lists the shards' jobs themselves).
func (r *Jobs) Arrays() []JobRecord {
	r.mu.Lock()
	runs := make([]*arrayRun, 0, len(r.arrays))
	for _, run := range r.arrays {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	out := make([]JobRecord, 0, len(runs))
	for _, run := range runs {
		j := r.arrayView(run)
		j.ArrayView.ShardJobs = nil
		out = append(out, *j)
	}
	return out
}
