package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/urfave/cli/v2"
)

func serviceCommand() *cli.Command {
	nameArg := func(c *cli.Context) (string, error) {
		if c.Args().Len() != 1 {
			return "", usagef("service names: gleaner service ls", "%s needs exactly one service name", c.Command.Name)
		}
		return c.Args().First(), nil
	}
	byName := func(method string) cli.ActionFunc {
		return func(c *cli.Context) error {
			name, err := nameArg(c)
			if err != nil {
				return err
			}
			var v services.ServiceView
			if err := callCmd(c, method, services.ServiceNameParams{Name: name}, &v); err != nil {
				return err
			}
			return emit(c, v, func(w io.Writer) { printService(w, v) })
		}
	}
	return &cli.Command{
		Name:  "service",
		Usage: "serve a model: run a service spec's replicas and reach them through a local gateway",
		Description: `A service spec (YAML, kind: service, see docs/SERVICES.md) is a job that
serves on a port. Your node places replicas.min replicas as jobs and serves
them through a gateway on 127.0.0.1, which routes each request to a ready
replica through its provider. With --listen 0.0.0.0:8080 (or the spec's
service.gateway.listen) other machines can call it too, and every call
needs the service's bearer token, which service up and status show.

   gleaner service up spec.yaml [--port N | --listen HOST:PORT] [--wait 5m]   place the replicas, print the gateway's URL
   gleaner service ls | status NAME | down NAME`,
		Subcommands: []*cli.Command{
			{Name: "up", Usage: "run a service spec and print its gateway's URL", ArgsUsage: "<spec.yaml>",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "port", Usage: "the gateway's port (0: any free port), on 127.0.0.1 unless the spec's service.gateway.listen names another host"},
					&cli.StringFlag{Name: "listen", Usage: "host:port the gateway listens on, over the spec's service.gateway.listen: 0.0.0.0:8080 for every interface (every call then needs the service's token)"},
					serviceUpWaitFlag(),
					jsonFlag},
				Action: serviceUp},
			{Name: "ls", Usage: "list this node's services", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					var vs []services.ServiceView
					if err := callCmd(c, "service_list", nil, &vs); err != nil {
						return err
					}
					return emit(c, vs, func(w io.Writer) {
						if len(vs) == 0 {
							fmt.Fprintln(w, "no services yet (gleaner service up spec.yaml)")
							return
						}
						rows := [][]string{{"SERVICE", "GATEWAY", "URL", "REPLICAS", "READY"}}
						for _, v := range vs {
							ready := 0
							for _, r := range v.Replicas {
								if r.Ready {
									ready++
								}
							}
							url := v.URL
							if url == "" {
								url = "-"
							}
							rows = append(rows, []string{v.Name, v.Gateway, url, strconv.Itoa(len(v.Replicas)), strconv.Itoa(ready)})
						}
						table(w, rows)
					})
				}},
			{Name: "status", Usage: "one service: its gateway, figures and replicas", ArgsUsage: "<name>", Flags: []cli.Flag{jsonFlag, serviceWatchFlag}, Action: serviceStatus(byName("service_status"))},
			{Name: "down", Usage: "stop a service: cancel its replicas, close its gateway (progress on stderr)", ArgsUsage: "<name>", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					name, err := nameArg(c)
					if err != nil {
						return err
					}
					return serviceDown(c, name)
				}},
			serviceScaleCommand(),
			serviceLogsCommand(),
		},
	}
}

func printService(w io.Writer, v services.ServiceView) {
	fmt.Fprintf(w, "service %s: gateway %s", v.Name, v.Gateway)
	if v.URL != "" {
		fmt.Fprintf(w, " at %s", v.URL)
	}
	fmt.Fprintln(w)
	printGatewayAccess(w, v, "  ")
	if v.Error != "" {
		fmt.Fprintf(w, "  %s\n", v.Error)
	}
	if v.NotPlaced != "" {
		fmt.Fprintf(w, "  not placed: %s\n", v.NotPlaced)
	}
	if v.Heal != "" {
		fmt.Fprintf(w, "  healing stopped: %s\n", v.Heal)
	}
	if v.Scale > 0 {
		fmt.Fprintf(w, "  scale fixed at %d replicas (`gleaner service scale %s auto` gives it back to the spec)\n", v.Scale, v.Name)
	}
	if v.Replaced > 0 {
		fmt.Fprintf(w, "  %d replicas replaced since it went up\n", v.Replaced)
	}
	if v.Renewed > 0 {
		fmt.Fprintf(w, "  %d replica leases renewed since it went up\n", v.Renewed)
	}
	if st := v.Stats; st != nil {
		fmt.Fprintf(w, "requests %d, errors %d, qps %.2f, tokens %d, p50 %s, p95 %s, p99 %s\n", st.Requests, st.Errors, st.QPS, st.Tokens, st.LatencyP50, st.LatencyP95, st.LatencyP99)
		fmt.Fprintf(w, "spent %s credits: %s per 1,000 requests, %s per 1M tokens\n", auction.FormatCredits(st.Spent), auction.FormatCredits(st.PerKRequests), auction.FormatCredits(st.PerMTokens))
	}
	rows := [][]string{{"#", "JOB", "STATE", "PROVIDER", "READY", "NOTE"}}
	for _, r := range v.Replicas {
		prov, note := "-", "-"
		if r.Provider != "" {
			prov = shortID(r.Provider)
		}
		if r.Note != "" {
			note = r.Note
		}
		if r.Renewing != "" {
			// Its lease ends soon; the successor takes its index once ready.
			if note = "renewing: " + r.Renewing; r.Note != "" {
				note += "; " + r.Note
			}
		}
		rows = append(rows, []string{strconv.Itoa(r.Index), r.Job, r.State, prov, strconv.FormatBool(r.Ready), note})
	}
	table(w, rows)
}

// listenFlag is --listen checked as the node will, a usage error before
// anything is sent; "" when not given.
func listenFlag(c *cli.Context) (string, error) {
	const hint = "for example: --listen 0.0.0.0:8080 (every interface), --listen 192.168.1.20:8080, or --port N on 127.0.0.1"
	if !c.IsSet("listen") {
		return "", nil
	}
	if c.IsSet("port") {
		return "", usagef(hint, "give --listen HOST:PORT or --port N, not both")
	}
	norm, err := auction.ParseGatewayListen(c.String("listen"))
	if err != nil {
		return "", usagef(hint, "--listen %v", err)
	}
	return norm, nil
}

// printGatewayAccess says, for a gateway that needs a token, where it
// listens, where the token is and a command that calls it; nothing for
// one on loopback, which is called as its URL says.
func printGatewayAccess(w io.Writer, v services.ServiceView, indent string) {
	if v.Token == "" {
		return
	}
	where := v.Listen
	if strings.HasPrefix(where, "0.0.0.0:") || strings.HasPrefix(where, "[::]:") {
		where += " (every interface)"
	}
	if len(v.LAN) > 0 {
		where += "; other machines: " + strings.Join(v.LAN, ", ")
	}
	fmt.Fprintf(w, "%slistens on %s\n", indent, where)
	fmt.Fprintf(w, "%severy call needs the bearer token in %s\n", indent, v.Token)
	fmt.Fprintf(w, "%s%s\n", indent, v.Curl)
}
