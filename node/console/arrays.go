package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// A job array (docs/JOBS.md, "Job arrays") is one row of the jobs page,
// with its progress; its shards' jobs are listed on its own page, not
// beside it. job_list returns both the array's record (array_view set)
// and its shards' jobs (array set).

// arrayView is job_status's array_view.
type arrayView struct {
	Shards       int             `json:"shards"`
	MaxParallel  int             `json:"max_parallel"`
	Done         int             `json:"done"`
	Running      int             `json:"running"`
	Auction      int             `json:"auction"`
	Reauctioning int             `json:"reauctioning"`
	Waiting      int             `json:"waiting"`
	Failed       int             `json:"failed"`
	Retries      int             `json:"retries"`
	Spent        auction.Credits `json:"spent"`
	Reason       string          `json:"reason"`
	ETASeconds   *int64          `json:"eta_s"`
	ShardJobs    []shardView     `json:"shard_jobs"`
}

// shardView is one row of array_view's shard_jobs.
type shardView struct {
	Index    int    `json:"index"`
	Phase    string `json:"phase"`
	Job      string `json:"job"`
	State    string `json:"state"`
	Provider string `json:"provider"`
	Attempts int    `json:"attempts"`
	Outputs  string `json:"outputs"`
	Files    int    `json:"files"`
}

// Line is the progress as `gleaner job status` words it.
func (v *arrayView) Line() string {
	line := fmt.Sprintf("%d/%d done, %d running, %d re-auctioning, %d failed; spent %s credits",
		v.Done, v.Shards, v.Running+v.Auction, v.Reauctioning, v.Failed, auction.FormatCredits(v.Spent))
	if v.ETASeconds != nil {
		line += "; ETA " + renter.FormatETA(time.Duration(*v.ETASeconds)*time.Second)
	}
	return line
}

// jobRows are the jobs page's rows: every job but the shards of an array
// listed itself, which its row stands for.
func jobRows(jobs []jobRecord) []jobRecord {
	arrays := map[string]bool{}
	for _, j := range jobs {
		if j.ArrayView != nil {
			arrays[j.ID] = true
		}
	}
	out := make([]jobRecord, 0, len(jobs))
	for _, j := range jobs {
		if j.Array == "" || !arrays[j.Array] {
			out = append(out, j)
		}
	}
	return out
}

// array is the page of one array: its progress and a row per shard,
// each linking to its current (or last) job's page.
func (c *Console) array(w http.ResponseWriter, r *http.Request, se *session, j jobRecord) {
	c.render(w, r, http.StatusOK, "array", se, map[string]any{"Title": "Array " + j.Name, "Active": "jobs", "Job": j, "A": j.ArrayView})
}
