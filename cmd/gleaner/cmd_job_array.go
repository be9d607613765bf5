package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/urfave/cli/v2"
)

// A job array (the spec's array:) has one ID, the array's; job status,
// cancel, fetch and logs --shard take it. Its shards are jobs of their
// own, named ARRAY-sN (ARRAY-sN-2 for a shard's second try), which every
// job command takes too.

const jobArrayHelp = `
Job arrays: "array: {shards: 100, max_parallel: 20}" runs the job as 100
shards, each a job of its own (own auction, lease, re-auctions) that reads
GLEANER_SHARD_INDEX (0-based) and GLEANER_SHARD_COUNT to pick its part of
the work. One ID stands for the array:
   gleaner job run array.yaml          submit, then show progress to the end
   gleaner job status ID               37/100 done, 12 running, ...; --json per shard
   gleaner job logs ID --shard 7       shard 7's output
   gleaner job fetch ID ./results      every shard's outputs, under ./results/shard-<i>/
   gleaner job cancel ID               stop every shard`

// arrayPollEvery is how often job run asks for an array's progress.
const arrayPollEvery = time.Second

// printArray is job status for an array.
func printArray(w io.Writer, j renting.JobRecord) {
	v := j.ArrayView
	fmt.Fprintf(w, "array:     %s\nstate:     %s\nprogress:  %s\n", j.ID, j.State, v.Line())
	if v.Waiting > 0 {
		fmt.Fprintf(w, "waiting:   %d (at most %d shards at once)\n", v.Waiting, v.MaxParallel)
	}
	if v.Retries > 0 {
		fmt.Fprintf(w, "retries:   %d shard job(s) placed again\n", v.Retries)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "reason:    %s\n", j.Error)
	}
	fmt.Fprintf(w, "shards:    gleaner job status %s --json lists each; gleaner job logs %s --shard N\n", j.ID, j.ID)
}

// followArray follows the array until it ends, showing its progress as
// job run does (array_progress.go).
func followArray(c *cli.Context, nc *nodeClient, id string) (renting.JobRecord, error) {
	var w arrayWatcher
	switch {
	case c.Bool("json"):
		w = newJSONWatcher(c.App.Writer)
	case isTerminal(c.App.ErrWriter):
		w = newBarWatcher(c.App.ErrWriter.(*os.File))
	default:
		w = &lineWatcher{w: c.App.ErrWriter}
	}
	poll := func(ctx context.Context) (renting.JobRecord, error) {
		var j renting.JobRecord
		err := nc.call(ctx, "job_status", node.JobIDParams{ID: id}, &j)
		if err == nil && j.ArrayView == nil {
			err = fmt.Errorf("job %s is no array", id)
		}
		return j, err
	}
	return watchArray(c.Context, poll, w, arrayPollEvery)
}

// arrayResult is job run's exit for an array: 0 once every shard
// completed, 1 with the reason otherwise.
func arrayResult(j renting.JobRecord) error {
	if j.State == renting.StateCompleted {
		return nil
	}
	why := j.Error
	if why == "" {
		why = j.State
	}
	return cli.Exit(fmt.Sprintf("array %s %s: %s", j.ID, j.State, why), 1)
}

// shardJob is the job of shard i of array j.
func shardJob(j renting.JobRecord, i int) (string, error) {
	v := j.ArrayView
	if i < 0 || i >= len(v.ShardJobs) {
		return "", usagef(fmt.Sprintf("gleaner job logs %s --shard 0", j.ID), "array %s has shards 0..%d", j.ID, len(v.ShardJobs)-1)
	}
	if v.ShardJobs[i].Job == "" {
		return "", fmt.Errorf("shard %d of %s has not been submitted yet (at most %d shards run at once)", i, j.ID, v.MaxParallel)
	}
	return v.ShardJobs[i].Job, nil
}

// fetchArray writes each completed shard's outputs under dir/shard-<i>/,
// each checked against its CID as job fetch checks one job's.
func fetchArray(c *cli.Context, j renting.JobRecord, dir string, timeout int) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists: name a new directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var results []node.DataFetchResult
	missing := 0
	for _, sh := range j.ArrayView.ShardJobs {
		if sh.Phase != renter.ShardDone || sh.Outputs == "" {
			missing++
			continue
		}
		var r node.DataFetchResult
		p := node.JobFetchParams{ID: sh.Job, Dir: filepath.Join(dir, fmt.Sprintf("shard-%d", sh.Index)), TimeoutS: timeout}
		if err := callFetching(c, "job_fetch", p, &r, sh.Outputs); err != nil {
			return fmt.Errorf("shard %d (%s): %w", sh.Index, sh.Job, err)
		}
		results = append(results, r)
	}
	return emit(c, results, func(w io.Writer) {
		for _, r := range results {
			fmt.Fprintf(w, "wrote %s (%s, %s)\n", r.Path, r.CID, size(r.Bytes))
		}
		if missing > 0 {
			fmt.Fprintf(w, "%d shard(s) have no outputs yet (not completed, or none written)\n", missing)
		}
	})
}

// isTerminal: w is a terminal, where a line can be rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// submittedArray is job run and job submit once the node took an array:
// its ID on stdout, then (run) its progress to the end.
func submittedArray(c *cli.Context, nc *nodeClient, j renting.JobRecord, follow bool) error {
	switch {
	case !follow:
		if err := emit(c, j, func(w io.Writer) { fmt.Fprintln(w, j.ID) }); err != nil {
			return err
		}
	case !c.Bool("json"): // with --json, the stream's objects name the ID
		fmt.Fprintln(c.App.Writer, j.ID)
	}
	if !c.Bool("json") {
		fmt.Fprintf(c.App.ErrWriter, "array %s submitted: %d shards, at most %d at once\nprogress: gleaner job status %s\n",
			j.ID, j.ArrayView.Shards, j.ArrayView.MaxParallel, j.ID)
	}
	if !follow {
		return nil
	}
	final, err := followArray(c, nc, j.ID)
	if ie := interrupted(c, j.ID, final.State); ie != nil {
		return ie
	}
	if err != nil {
		return err
	}
	if !c.Bool("json") { // the stream's last object holds the record
		printArray(c.App.ErrWriter, final)
	}
	return arrayResult(final)
}
