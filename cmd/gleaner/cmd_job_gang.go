package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/urfave/cli/v2"
)

// A gang (the spec's gang:) has one ID, the gang's; job status and job
// cancel take it. Its members are jobs of their own, named GANG-mR
// (GANG-mR-P in the gang's P'th placement), which every job command takes
// too.

const jobGangHelp = `

Gangs: "gang: {members: 4}" runs the job on 4 distinct providers at once,
each on resources.gpus GPUs, told GLEANER_GANG_RANK (0-based) and
GLEANER_GANG_SIZE. Every member holds an award before any starts; one lost
or preempted stops the others and the gang is placed again from its
checkpoints. One ID stands for the gang:
   gleaner job run gang.yaml           submit, then show its state to the end
   gleaner job status ID               its members, their providers, one total spend
   gleaner job cancel ID               stop every member`

// gangPollEvery is how often job run asks for a gang's state.
const gangPollEvery = time.Second

// printGang is job status for a gang.
func printGang(w io.Writer, j renting.JobRecord) {
	v := j.GangView
	fmt.Fprintf(w, "gang:      %s\nstate:     %s\nprogress:  %s\n", j.ID, j.State, v.Line())
	if j.Error != "" {
		fmt.Fprintf(w, "reason:    %s\n", j.Error)
	}
	rows := [][]string{{"RANK", "JOB", "STATE", "PROVIDER"}}
	for _, m := range v.MemberJobs {
		state, prov := m.State, "-"
		if state == "" {
			state = m.Phase
		}
		if m.Provider != "" {
			prov = shortID(m.Provider)
		}
		rows = append(rows, []string{fmt.Sprint(m.Rank), m.Job, state, prov})
	}
	table(w, rows)
}

// followGang polls the gang until it ends, a line per change.
func followGang(c *cli.Context, nc *nodeClient, id string) (renting.JobRecord, error) {
	last := ""
	for {
		var j renting.JobRecord
		if err := nc.call(c.Context, "job_status", node.JobIDParams{ID: id}, &j); err != nil {
			return j, err
		}
		if j.GangView == nil {
			return j, fmt.Errorf("%s is not a gang", id)
		}
		if line := j.State + ": " + j.GangView.Line(); line != last && !c.Bool("json") {
			fmt.Fprintln(c.App.ErrWriter, line)
			last = line
		}
		if renting.Terminal(j.State) {
			return j, nil
		}
		select {
		case <-c.Context.Done():
			return j, c.Context.Err()
		case <-time.After(gangPollEvery):
		}
	}
}

// submittedGang is job run and job submit once the node took a gang:
// its ID on stdout, then (run) its state to the end; the exit is 0 once
// every member completed.
func submittedGang(c *cli.Context, nc *nodeClient, j renting.JobRecord, follow bool) error {
	if !follow || c.Bool("json") {
		if err := emit(c, j, func(w io.Writer) { fmt.Fprintln(w, j.ID) }); err != nil || !follow {
			return err
		}
	} else {
		fmt.Fprintln(c.App.Writer, j.ID)
	}
	if !c.Bool("json") {
		fmt.Fprintf(c.App.ErrWriter, "gang %s submitted: %d members on distinct providers\nstate: gleaner job status %s\n", j.ID, j.GangView.Members, j.ID)
	}
	if !follow {
		return nil
	}
	final, err := followGang(c, nc, j.ID)
	if ie := interrupted(c, j.ID, final.State); ie != nil {
		return ie
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		_ = emit(c, final, nil)
	} else {
		printGang(c.App.ErrWriter, final)
	}
	if final.State == renting.StateCompleted {
		return nil
	}
	why := final.Error
	if why == "" {
		why = final.State
	}
	return cli.Exit(fmt.Sprintf("gang %s %s: %s", final.ID, final.State, why), 1)
}
