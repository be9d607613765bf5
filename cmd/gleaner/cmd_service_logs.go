package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/urfave/cli/v2"
)

// serviceLogsCommand is `gleaner service logs NAME [--replica I]
// [--follow] [--tail N]`.
func serviceLogsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print a service's replica jobs' output, each line prefixed by its replica index",
		ArgsUsage: "<name>",
		Description: `Prints the retained output (the last 256 KiB) of each replica's current
job, replica 0 first, each line as "[I] line". --follow then prints their
output as it comes, until Ctrl-C (the replicas at the start: one that
replaces them later is not followed; run it again). --json prints
service_logs' result (each replica's index, job and logs, --tail applied);
with --follow it is one object per line, that result first, then each of
the replicas' job events as {"replica", "job", "event"}.`,
		Flags: []cli.Flag{jsonFlag,
			&cli.IntFlag{Name: "replica", Usage: "only this replica's output (its index in `gleaner service status`)"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "go on printing output as it comes"},
			&cli.IntFlag{Name: "tail", Usage: "print only each replica's last N lines of the retained output (0: all)"},
		},
		Action: serviceLogs,
	}
}

func serviceLogs(c *cli.Context) error {
	if c.Args().Len() != 1 {
		return usagef("for example: gleaner service logs chat --replica 0 --follow", "%s needs exactly one service name", c.Command.Name)
	}
	if c.Int("tail") < 0 {
		return usagef("--tail 20: each replica's last 20 lines", "--tail %d: want 0 or more lines", c.Int("tail"))
	}
	p := services.ServiceLogsParams{Name: c.Args().First()}
	if c.IsSet("replica") {
		i := c.Int("replica")
		p.Replica = &i
	}
	nc, err := dial(c)
	if err != nil {
		return err
	}
	var res services.ServiceLogsResult
	if err := nc.call(c.Context, "service_logs", p, &res); err != nil {
		return err
	}
	if c.Bool("json") {
		for i := range res.Replicas {
			res.Replicas[i].Logs = tailLines(res.Replicas[i].Logs, c.Int("tail"))
		}
		if !c.Bool("follow") {
			return emit(c, res, nil)
		}
		return followLogsJSON(c, nc, res)
	}
	w := &prefixWriter{w: c.App.Writer}
	for _, r := range res.Replicas {
		w.write(r.Index, tailLines(r.Logs, c.Int("tail")))
		w.flush(r.Index)
	}
	if !c.Bool("follow") {
		return nil
	}
	return followReplicas(c, nc, res, func(r services.ServiceReplicaLogs, raw json.RawMessage) {
		var ev renting.JobEvent
		if json.Unmarshal(raw, &ev) != nil {
			return
		}
		switch ev.Type {
		case "log":
			w.write(r.Index, ev.Log)
		case "dropped", "state":
			if ev.Type == "state" && !renting.Terminal(ev.State) {
				return
			}
			w.flush(r.Index)
			note := ev.Note
			if ev.Type == "state" {
				note = "job " + r.Job + " " + ev.State + sep(ev.Note)
			}
			fmt.Fprintf(c.App.ErrWriter, "gleaner: replica %d: %s\n", r.Index, note)
		}
	}, func(r services.ServiceReplicaLogs) { w.flush(r.Index) })
}

// followReplicas subscribes to job_follow for each replica's job and
// hands each event to on, one goroutine a replica, then done(replica)
// when its subscription ends; it returns once all have ended (Ctrl-C, or
// the jobs').
func followReplicas(c *cli.Context, nc *nodeClient, res services.ServiceLogsResult, on func(services.ServiceReplicaLogs, json.RawMessage), done func(services.ServiceReplicaLogs)) error {
	var wg sync.WaitGroup
	for _, r := range res.Replicas {
		events, err := nc.Subscribe(c.Context, "job_follow", node.JobIDParams{ID: r.Job})
		if err != nil {
			return err
		}
		wg.Go(func() {
			for raw := range events {
				on(r, raw)
			}
			if done != nil {
				done(r)
			}
		})
	}
	wg.Wait()
	return nil
}

// followLogsJSON prints res and then every job event of its replicas, one
// JSON object a line, until the subscriptions end (Ctrl-C, or the jobs').
func followLogsJSON(c *cli.Context, nc *nodeClient, res services.ServiceLogsResult) error {
	var mu sync.Mutex // one line at a time
	enc := json.NewEncoder(c.App.Writer)
	if err := enc.Encode(res); err != nil {
		return err
	}
	return followReplicas(c, nc, res, func(r services.ServiceReplicaLogs, raw json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(struct {
			Replica int             `json:"replica"`
			Job     string          `json:"job"`
			Event   json.RawMessage `json:"event"`
		}{r.Index, r.Job, raw})
	}, nil)
}

func sep(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

// tailLines is the last n lines of s (all when n is 0).
func tailLines(s string, n int) string {
	if n <= 0 || s == "" {
		return s
	}
	body := strings.TrimSuffix(s, "\n")
	lines := strings.Split(body, "\n")
	if len(lines) <= n {
		return s
	}
	out := strings.Join(lines[len(lines)-n:], "\n")
	if strings.HasSuffix(s, "\n") {
		out += "\n"
	}
	return out
}

// prefixWriter writes each replica's output a whole line at a time,
// prefixed "[I] ", keeping a line not yet ended until its end comes (so
// that replicas' lines never interleave mid-line).
type prefixWriter struct {
	mu      sync.Mutex
	w       io.Writer
	partial map[int]string
}

func (p *prefixWriter) write(i int, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partial == nil {
		p.partial = map[int]string{}
	}
	s = p.partial[i] + s
	end := strings.LastIndexByte(s, '\n')
	p.partial[i] = s[end+1:]
	if end < 0 {
		return
	}
	prefix := "[" + strconv.Itoa(i) + "] "
	var b strings.Builder
	for line := range strings.SplitSeq(s[:end], "\n") {
		b.WriteString(prefix)
		b.WriteString(line)
		b.WriteByte('\n')
	}
	io.WriteString(p.w, b.String())
}

// flush writes replica i's unended line, if any.
func (p *prefixWriter) flush(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.partial[i]; s != "" {
		fmt.Fprintf(p.w, "[%d] %s\n", i, s)
		p.partial[i] = ""
	}
}
