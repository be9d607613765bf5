package renting

import (
	"fmt"

	"github.com/gleaner-net/gleaner/auction"
)

// GangView is a gang's state as job_status shows it, on the JobRecord
// whose ID is the gang's: its members now and one total spend. Each
// member is billed by its own provider; the total is every member job's
// of every placement, so the renter sees what the gang cost.
type GangView struct {
	Members     int              `json:"members"`
	Placement   int              `json:"placement"` // 1-based: placements so far
	Preemptions int              `json:"preemptions"`
	Reauctions  int              `json:"reauctions"`
	Spent       auction.Credits  `json:"spent" doc:"micro-credits (auction.Credits) spent on every member job of every placement so far"`
	Reason      string           `json:"reason,omitempty"`
	MemberJobs  []GangMemberView `json:"member_jobs"`
}

// GangMemberView is one rank's current (or last) job.
type GangMemberView struct {
	Rank     int             `json:"rank"`
	Phase    string          `json:"phase"`
	Job      string          `json:"job,omitempty"`
	State    string          `json:"state,omitempty"`
	Provider string          `json:"provider,omitempty"`
	Spent    auction.Credits `json:"spent" doc:"micro-credits (auction.Credits) this job spent"`
}

// Line is the gang in one line, as `gleaner job status` prints it.
func (v *GangView) Line() string {
	running := 0
	for _, m := range v.MemberJobs {
		if m.State == StateRunning {
			running++
		}
	}
	return fmt.Sprintf("%d members, %d running, placement %d (%d preempted, %d re-auctioned); spent %s credits in all",
		v.Members, running, v.Placement, v.Preemptions, v.Reauctions, auction.FormatCredits(v.Spent))
}

// gangView is the JobRecord that stands for run's gang.
func (r *Jobs) gangView(run *gangRun) *JobRecord {
	run.mu.Lock()
	snap, rec, gpus := run.g.Snapshot(), run.rec, run.spec.Resources.GPUs
	run.mu.Unlock()
	v := &GangView{Members: rec.Members, Placement: snap.Placement, Preemptions: snap.Preemptions, Reauctions: snap.Reauctions, Reason: snap.Reason}
	r.mu.Lock()
	for _, j := range r.jobs {
		if j.Gang == rec.ID {
			v.Spent = addCredits(v.Spent, jobSpent(j))
		}
	}
	for i, m := range snap.Members {
		mv := GangMemberView{Rank: i, Phase: m.Phase, Job: m.Job}
		if j := r.jobs[m.Job]; j != nil {
			mv.State, mv.Provider, mv.Spent = j.State, j.Provider, jobSpent(j)
		}
		v.MemberJobs = append(v.MemberJobs, mv)
	}
	r.mu.Unlock()
	return &JobRecord{ID: rec.ID, Name: rec.Name, State: snap.State, Spec: rec.Spec, Created: rec.Created, Updated: rec.Updated,
		EndedAt: rec.EndedAt, Error: snap.Reason, Paid: v.Spent, GPUs: rec.Members * gpus, GangView: v}
}

// Gangs are the views of every gang (job_list lists the members' jobs
// themselves).
func (r *Jobs) Gangs() []JobRecord {
	r.mu.Lock()
	runs := make([]*gangRun, 0, len(r.gangs))
	for _, run := range r.gangs {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	out := make([]JobRecord, 0, len(runs))
	for _, run := range runs {
		out = append(out, *r.gangView(run))
	}
	return out
}
