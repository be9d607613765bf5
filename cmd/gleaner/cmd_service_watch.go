package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/urfave/cli/v2"
)

var serviceWatchFlag = &cli.BoolFlag{Name: "watch", Aliases: []string{"w"},
	Usage: "print the service's live figures, a line a second, until Ctrl-C (with --json: one JSON object per line)"}

// serviceStatus is `gleaner service status NAME`: once (status), or with
// --watch a line a second from the node's service_watch subscription.
func serviceStatus(status cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if !c.Bool("watch") {
			return status(c)
		}
		if c.Args().Len() != 1 {
			return usagef("service names: gleaner service ls", "%s needs exactly one service name", c.Command.Name)
		}
		name := c.Args().First()
		nc, err := dial(c)
		if err != nil {
			return err
		}
		events, err := nc.Subscribe(c.Context, "service_watch", services.ServiceNameParams{Name: name})
		if err != nil {
			return err
		}
		for raw := range events {
			if c.Bool("json") {
				var compact json.RawMessage
				if json.Unmarshal(raw, &compact) == nil {
					fmt.Fprintf(c.App.Writer, "%s\n", compact)
				}
				continue
			}
			var v services.ServiceView
			if json.Unmarshal(raw, &v) == nil {
				fmt.Fprintln(c.App.Writer, watchLine(time.Now(), v))
			}
		}
		if c.Context.Err() == nil {
			fmt.Fprintf(c.App.ErrWriter, "gleaner: service %s is down or gone; watch ended\n", name)
		}
		return nil
	}
}

// watchLine is one refreshed line of `service status --watch`.
func watchLine(now time.Time, v services.ServiceView) string {
	ready := 0
	for _, r := range v.Replicas {
		if r.Ready {
			ready++
		}
	}
	line := now.Local().Format("15:04:05") + "  " + v.Name
	if v.Gateway != "up" {
		line += "  gateway " + v.Gateway
	}
	line += "  ready " + strconv.Itoa(ready) + "/" + strconv.Itoa(len(v.Replicas))
	st := v.Stats
	if st == nil {
		return line
	}
	errPct := 0.0
	if st.Requests > 0 {
		errPct = 100 * float64(st.Errors) / float64(st.Requests)
	}
	line += fmt.Sprintf("  qps %.2f  p50 %s p95 %s p99 %s  errors %d (%.1f%%)  spent %s  per 1k req %s  per 1M tok %s",
		st.QPS, roundLat(st.LatencyP50), roundLat(st.LatencyP95), roundLat(st.LatencyP99),
		st.Errors, errPct, auction.FormatCredits(st.Spent), costOrDash(st.PerKRequests), costOrDash(st.PerMTokens))
	return line
}

func roundLat(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

func costOrDash(c auction.Credits) string {
	if c == 0 {
		return "-"
	}
	return auction.FormatCredits(c)
}
