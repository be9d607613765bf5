package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/urfave/cli/v2"
)

// consoleCommand prints where the running daemon's web console is. It
// opens no browser: on a headless GPU box there is none, and the URL is
// what an SSH tunnel or a desktop browser needs.
func consoleCommand() *cli.Command {
	return &cli.Command{
		Name:  "console",
		Usage: "print the URL of the daemon's web console (log in with the token in rpc.token)",
		Description: `The console is served by the daemon on its RPC address, under /ui/.
Open the URL in a browser on the same machine, or through a tunnel:

   ssh -L 4031:127.0.0.1:4031 gpu-box    then open http://127.0.0.1:4031/ui/

and log in with the contents of the repo's rpc.token file. See docs/CONSOLE.md.`,
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			r, err := openRepo(c)
			if err != nil {
				return err
			}
			url, err := r.URL()
			if errors.Is(err, repo.ErrNotRunning) {
				return withHint(fmt.Errorf("no daemon is running for the repo at %s", r.Dir), "start one with `gleaner daemon`; the console is part of it")
			}
			if err != nil {
				return err
			}
			out := struct {
				URL       string `json:"url"`
				TokenFile string `json:"token_file"`
			}{url + "/ui/", filepath.Join(r.Dir, repo.TokenFile)}
			return emit(c, out, func(w io.Writer) {
				fmt.Fprintln(w, out.URL)
				fmt.Fprintf(w, "log in with the token in %s\n", out.TokenFile)
			})
		},
	}
}
