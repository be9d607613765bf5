package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/urfave/cli/v2"
)

// callFetching makes a call that fetches the DAG under cidStr and, while
// it runs, shows on stderr how far the fetch has come (data_fetching),
// every second, unless --json asks for quiet. The call itself is not
// affected by the progress polls failing.
func callFetching(c *cli.Context, method string, params, result any, cidStr string) error {
	nc, err := dial(c)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- nc.call(c.Context, method, params, result) }()
	if c.Bool("json") {
		return <-done
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	shown := false
	for {
		select {
		case err := <-done:
			if shown {
				fmt.Fprintln(c.App.ErrWriter)
			}
			return err
		case <-t.C:
			var fs []node.DataFetching
			if nc.call(c.Context, "data_fetching", struct{}{}, &fs) != nil {
				continue
			}
			for _, f := range fs {
				if f.CID == cidStr {
					printProgress(c.App.ErrWriter, f)
					shown = true
				}
			}
		}
	}
}

// printProgress rewrites one line: bytes so far, of the total once the
// root is here, and the rate.
func printProgress(w io.Writer, f node.DataFetching) {
	secs := max(time.Since(f.Since).Seconds(), 0.001)
	rate := size(int64(float64(f.Bytes)/secs)) + "/s"
	if f.TotalBytes > 0 {
		pct := min(100, 100*float64(f.Bytes)/float64(f.TotalBytes))
		fmt.Fprintf(w, "\rfetching %s: %s of %s (%.0f%%), %d blocks, %s   ", shortCID(f.CID), size(f.Bytes), size(f.TotalBytes), pct, f.Blocks, rate)
		return
	}
	fmt.Fprintf(w, "\rfetching %s: %s, %d blocks, %s   ", shortCID(f.CID), size(f.Bytes), f.Blocks, rate)
}

func shortCID(s string) string {
	if len(s) > 16 {
		return s[:8] + "…" + s[len(s)-6:]
	}
	return s
}
