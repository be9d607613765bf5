package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/urfave/cli/v2"
)

// defaultServiceUpWait is how long `service up` waits for a replica to be
// placed: auctions take seconds, and a few minutes cover pulling a model
// server's image of some gigabytes; a larger one wants a longer --wait.
const defaultServiceUpWait = 5 * time.Minute

func serviceUpWaitFlag() cli.Flag {
	return durationFlag("wait", defaultServiceUpWait,
		"how long to wait for a replica to be placed (its job running on a provider) and ready (its readiness check passed in the gateway, so the URL serves at once); if none is placed, the command fails naming why: "+
			"a service none of whose replicas could be placed is taken down, one still being placed when the wait ends is kept. "+
			"0: print the URL as soon as the replicas are submitted, without waiting")
}

// serviceUp is `gleaner service up SPEC`: service_up, waiting (--wait)
// for a replica to be placed, with the replicas' progress on stderr; the
// gateway's URL alone on stdout once one is, or a failure that names why
// none was and says whether the service was taken down or kept.
func serviceUp(c *cli.Context) error {
	if c.Args().Len() != 1 {
		return usagef("for example: gleaner service up service.yaml (format: docs/SERVICES.md)", "%s needs exactly one service spec file", c.Command.Name)
	}
	listen, err := listenFlag(c)
	if err != nil {
		return err
	}
	wait := durationOf(c, "wait")
	if wait < 0 || wait > services.MaxServiceUpWait {
		return usagef("for example: --wait 15m for a large image, --wait 0 not to wait", "--wait %v: use 0 to %v", wait, services.MaxServiceUpWait)
	}
	spec, err := os.ReadFile(c.Args().First())
	if err != nil {
		return err
	}
	nc, err := dial(c)
	if err != nil {
		return err
	}
	name := "" // for the progress and messages; a spec that does not parse is the node's to report
	if s, err := auction.ParseJobSpec(spec); err == nil {
		name = s.Name
	}
	params := services.ServiceUpParams{Spec: string(spec), Port: c.Int("port"), Listen: listen,
		WaitS: int((wait + time.Second - 1) / time.Second)}
	var v services.ServiceView
	err = callPlacing(c, nc, params, &v, name, wait)
	var re *rpc.Error
	if errors.As(err, &re) && re.Code == services.CodeServiceNotPlaced {
		var nv services.ServiceView
		if raw, merr := json.Marshal(re.Data); merr == nil && json.Unmarshal(raw, &nv) == nil && c.Bool("json") {
			_ = emit(c, nv, nil) // the same outcome, in its up field
		}
		if nv.Up != nil && nv.Up.Kept {
			return withHint(err, "to wait longer: --wait 15m (a large image takes minutes to pull)")
		}
		return withHint(err, "nothing of it is left: fix what this names and run `gleaner service up` again")
	}
	if err != nil {
		if c.Context.Err() != nil && name != "" {
			return &interruptedError{msg: fmt.Sprintf("interrupted; service %s is kept and goes on placing its replicas", name),
				hint: fmt.Sprintf("follow it: gleaner service status %s; remove it: gleaner service down %s", name, name)}
		}
		return err
	}
	// The URL alone on stdout, as a script captures it; how to call a
	// gateway that needs a token goes to stderr.
	return emit(c, v, func(w io.Writer) {
		fmt.Fprintln(w, v.URL)
		if v.Up != nil && v.Up.Result == services.UpPlaced && !v.Up.Ready {
			fmt.Fprintf(c.App.ErrWriter, "service %s: placed, but no replica has passed its readiness check within --wait: the gateway answers 503 with Retry-After until one does (gleaner service status %s)\n", v.Name, v.Name)
		}
		printGatewayAccess(c.App.ErrWriter, v, "")
	})
}

// placingPoll is how often `service up` looks at its replicas while it
// waits.
const placingPoll = time.Second

// callPlacing makes the service_up call and, while it waits for a
// replica to be placed, prints on stderr each replica's state as it
// changes (from service_status), unless --json asks for quiet.
func callPlacing(c *cli.Context, nc *nodeClient, params services.ServiceUpParams, result *services.ServiceView, name string, wait time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- nc.call(c.Context, "service_up", params, result) }()
	if c.Bool("json") || params.WaitS == 0 || name == "" {
		return <-done
	}
	w := c.App.ErrWriter
	fmt.Fprintf(w, "service %s: waiting up to %v for a replica to be placed and ready\n", name, wait)
	t := time.NewTicker(placingPoll)
	defer t.Stop()
	shown := map[int]string{}
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			var v services.ServiceView
			if nc.call(c.Context, "service_status", services.ServiceNameParams{Name: name}, &v) != nil {
				continue // not up yet, or already taken down
			}
			for _, r := range v.Replicas {
				if line := placingLine(r); shown[r.Index] != line {
					fmt.Fprintln(w, line)
					shown[r.Index] = line
				}
			}
		}
	}
}

// placingLine is one replica's progress line: its job, state, provider
// and error.
func placingLine(r services.ServiceReplica) string {
	line := fmt.Sprintf("  replica %d (job %s): %s", r.Index, r.Job, r.State)
	if r.Provider != "" {
		line += " on " + shortID(r.Provider)
	}
	if r.Error != "" {
		line += ": " + r.Error
	}
	return line
}
