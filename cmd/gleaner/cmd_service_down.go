package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/urfave/cli/v2"
)

// serviceDown is `gleaner service down NAME`: one service_down call, in
// which the node closes the gateway and cancels the replicas one after
// the other, each provider stopping its container with the lease's
// notice. Meanwhile, unless --json asks for quiet, each replica's
// progress goes to stderr as its job record shows it: cancelled when the
// node begins on it, stopped when its provider reports the container's
// exit.
func serviceDown(c *cli.Context, name string) error {
	nc, err := dial(c)
	if err != nil {
		return err
	}
	params := services.ServiceNameParams{Name: name}
	var before services.ServiceView
	if !c.Bool("json") {
		// An error (no such service) is service_down's to report.
		_ = nc.call(c.Context, "service_status", params, &before)
	}
	var v services.ServiceView
	done := make(chan error, 1)
	go func() { done <- nc.call(c.Context, "service_down", params, &v) }()
	var states map[string]string
	if len(before.Replicas) > 0 {
		states, err = watchDown(c, nc, name, before.Replicas, done)
	} else {
		err = <-done
	}
	if err != nil {
		return err
	}
	return emit(c, v, func(w io.Writer) {
		// service_down's view is the service as it was when the down
		// began; the table shows each replica's job as it is now.
		for i, r := range v.Replicas {
			if s := states[r.Job]; s != "" {
				v.Replicas[i].State, v.Replicas[i].Ready = s, false
			}
		}
		printService(w, v)
	})
}

// downPoll is how often `service down` reads its replicas' jobs while
// the node cancels them.
const downPoll = 200 * time.Millisecond

// watchDown prints the replicas' progress on stderr until done, and
// returns service_down's error and each replica job's state as last read.
func watchDown(c *cli.Context, nc *nodeClient, name string, replicas []services.ServiceReplica, done <-chan error) (map[string]string, error) {
	w := c.App.ErrWriter
	began := time.Now()
	fmt.Fprintf(w, "service %s: closing its gateway and cancelling %d replica(s)\n", name, len(replicas))
	d := downProgress{began: began, replicas: replicas, said: make([]string, len(replicas)), states: map[string]string{}}
	for i, r := range replicas {
		if renting.Terminal(r.State) && r.State != renting.StateCancelled {
			// Nothing to stop; its provider is told all the same, in case
			// its container went on after the job ended here (a provider
			// lost mid-pull).
			d.said[i], d.states[r.Job] = "ended", r.State
			fmt.Fprintf(w, "  replica %d of %d (job %s) had already ended (%s)\n", i+1, len(replicas), r.Job, r.State)
		}
	}
	t := time.NewTicker(downPoll)
	defer t.Stop()
	poll := func() {
		for i, r := range replicas {
			if d.said[i] == "ended" || d.said[i] == "stopped" {
				continue
			}
			var j renting.JobRecord
			if nc.call(c.Context, "job_status", node.JobIDParams{ID: r.Job}, &j) == nil {
				d.saw(w, i, j)
			}
		}
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			// Each provider has answered; the exits its follow streams
			// carry are recorded a moment later.
			for end := time.Now().Add(time.Second); !d.settled() && time.Now().Before(end); time.Sleep(downPoll / 2) {
				poll()
			}
			fmt.Fprintf(w, "service %s: down in %s\n", name, time.Since(began).Round(100*time.Millisecond))
			return d.states, nil
		case <-t.C:
			poll()
		}
	}
}

// downProgress is what `service down` has said of each replica: "",
// "cancelling", "stopped" or "ended" (before the down began), and the
// state its job was last read in, by job ID.
type downProgress struct {
	began    time.Time
	replicas []services.ServiceReplica
	said     []string
	states   map[string]string
}

// settled: every replica has stopped or had ended.
func (d *downProgress) settled() bool {
	for _, s := range d.said {
		if s != "stopped" && s != "ended" {
			return false
		}
	}
	return true
}

// saw prints what replica i's job record j shows that was not said yet.
func (d *downProgress) saw(w io.Writer, i int, j renting.JobRecord) {
	r, n := d.replicas[i], len(d.replicas)
	d.states[r.Job] = j.State
	on := ""
	if r.Provider != "" {
		on = " on provider " + shortID(r.Provider)
	}
	if j.State == renting.StateCancelled && d.said[i] == "" {
		d.said[i] = "cancelling"
		fmt.Fprintf(w, "  cancelling replica %d of %d (job %s%s)...\n", i+1, n, r.Job, on)
	}
	if d.said[i] == "cancelling" && j.EndedAt != nil && !j.EndedAt.Before(d.began.Add(-time.Second)) {
		d.said[i] = "stopped"
		code := ""
		if j.ExitCode != nil {
			code = fmt.Sprintf(", exit code %d", *j.ExitCode)
		}
		fmt.Fprintf(w, "  replica %d of %d stopped (%s after the down began%s)\n", i+1, n, time.Since(d.began).Round(100*time.Millisecond), code)
	}
}
