package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/gleaner-net/gleaner/node"
	"github.com/urfave/cli/v2"
)

func rpcCommand() *cli.Command {
	return &cli.Command{
		Name:      "rpc",
		Usage:     "call any JSON-RPC method of the node (raw access for scripts)",
		ArgsUsage: "<method> [params-json]",
		Description: `Prints the method's JSON result. params-json is a JSON object (by name) or
array (by position). List every method with its parameters:

   gleaner rpc rpc.discover
   gleaner rpc node_info
   gleaner rpc node_ping '{"peer":"12D3KooW...","count":2}'

The output is JSON with or without --json.`,
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.Args().Len() < 1 || c.Args().Len() > 2 {
				return usagef("for example: gleaner rpc node_info", "rpc needs a method name and optionally one JSON params argument")
			}
			var params json.RawMessage
			if c.Args().Len() == 2 {
				params = json.RawMessage(c.Args().Get(1))
				if !json.Valid(params) {
					return usagef(`quote it for the shell, e.g. '{"peer":"12D3KooW..."}'`, "params %q is not valid JSON", c.Args().Get(1))
				}
			}
			nc, err := dial(c)
			if err != nil {
				return err
			}
			var res json.RawMessage
			if err := nc.call(c.Context, c.Args().First(), params, &res); err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, res, "", "  "); err != nil {
				buf.Reset()
				buf.Write(res)
			}
			fmt.Fprintln(c.App.Writer, buf.String())
			return nil
		},
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print gleaner's version",
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			v := struct {
				Version string `json:"version"`
				Go      string `json:"go"`
				OS      string `json:"os"`
				Arch    string `json:"arch"`
			}{node.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH}
			return emit(c, v, func(w io.Writer) {
				fmt.Fprintf(w, "gleaner %s (%s, %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
			})
		},
	}
}
