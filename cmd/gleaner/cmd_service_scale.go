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

// serviceScaleCommand is `gleaner service scale NAME N|auto`.
func serviceScaleCommand() *cli.Command {
	return &cli.Command{
		Name:      "scale",
		Usage:     "fix a service's replica count, or give it back to the spec (auto)",
		ArgsUsage: "<name> <N|auto>",
		Description: fmt.Sprintf(`N (1..%d) fixes the count: the service adds replicas (each a new job,
auctioned) or cancels its highest ones, never the floor's. auto gives the
count back to the spec's replicas.min, or to its autoscaler.`, auction.MaxServiceReplicas),
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			hint := "for example: gleaner service scale chat 3, or gleaner service scale chat auto"
			if c.Args().Len() != 2 {
				return usagef(hint, "%s needs a service name and a replica count (or auto)", c.Command.Name)
			}
			name, arg := c.Args().Get(0), strings.TrimSpace(c.Args().Get(1))
			n := 0
			if !strings.EqualFold(arg, "auto") {
				v, err := strconv.Atoi(arg)
				if err != nil || v < 1 || v > auction.MaxServiceReplicas {
					return usagef(hint, "replica count %q: want 1..%d, or auto", arg, auction.MaxServiceReplicas)
				}
				n = v
			}
			var v services.ServiceView
			if err := callCmd(c, "service_scale", services.ServiceScaleParams{Name: name, Replicas: n}, &v); err != nil {
				return err
			}
			return emit(c, v, func(w io.Writer) {
				if n == 0 {
					fmt.Fprintf(w, "service %s: replica count back to the spec (auto); %d replicas now\n", v.Name, len(v.Replicas))
					return
				}
				fmt.Fprintf(w, "service %s: scaling to %d replicas (%d now; see gleaner service status %s)\n", v.Name, n, len(v.Replicas), v.Name)
			})
		},
	}
}
