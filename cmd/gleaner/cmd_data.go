package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/docker/go-units"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/urfave/cli/v2"
)

var publicFlag = &cli.BoolFlag{Name: "public",
	Usage: "serve it to any peer and announce it in the DHT (without it, data is private to this node: served only to the peers it grants it to, such as a lease's provider for the lease)"}

var fetchTimeoutFlag = durationFlag("timeout", node.DefaultFetchTimeout,
	"give up when the DAG is not complete after this long (no peer serves it, or too slowly)")

func dataCommand() *cli.Command {
	return &cli.Command{
		Name:  "data",
		Usage: "content-addressed files: add, fetch, pin and free job data and datasets",
		Description: `Files are stored as IPFS-compatible UnixFS blocks in <repo>/data, up to
data.quota_gib in config.toml. The same files give the same CID as
'ipfs add --cid-version=1'. Blocks travel between gleaner nodes with bitswap
over the node's libp2p connections; each is checked against its CID, so a
peer cannot serve wrong bytes.

Data is private by default: what this node imports or fetches is served to
no peer and announced nowhere, except to the provider of a lease that names
it, for the lease. --public (data add, pin, get) serves it to anyone and
announces it in the DHT. A job's outputs are sealed to its renter: only the
renter's node can fetch and open them (docs/DATA.md, "Who sees what").`,
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "import a file or directory and pin it, private unless --public; prints its CID",
				ArgsUsage: "<path>",
				Flags:     []cli.Flag{jsonFlag, publicFlag},
				Action: func(c *cli.Context) error {
					if c.Args().Len() != 1 {
						return usagef("example: gleaner data add ./weights", "data add needs exactly one path")
					}
					abs, err := filepath.Abs(c.Args().First())
					if err != nil {
						return err
					}
					var r node.DataFetchResult
					if err := callCmd(c, "data_add", node.DataPathParams{Path: abs, Public: c.Bool("public")}, &r); err != nil {
						return err
					}
					return emit(c, r, func(w io.Writer) {
						fmt.Fprintln(w, r.CID)
						fmt.Fprintf(c.App.ErrWriter, "added %s (%s), pinned, %s\n", abs, size(r.Bytes), visibility(r.Public))
					})
				},
			},
			{
				Name:      "pin",
				Usage:     "fetch a DAG from the peers that have it and keep it",
				ArgsUsage: "<cid>",
				Flags:     []cli.Flag{jsonFlag, fetchTimeoutFlag, publicFlag},
				Action: func(c *cli.Context) error {
					cidArg, err := oneCID(c, "pin")
					if err != nil {
						return err
					}
					p, err := cidParams(c, cidArg)
					if err != nil {
						return err
					}
					var r node.DataFetchResult
					if err := callFetching(c, "data_pin", p, &r, cidArg); err != nil {
						return err
					}
					return emit(c, r, func(w io.Writer) {
						fmt.Fprintf(w, "pinned %s (%s%s), %s\n", r.CID, size(r.Bytes), fetchedNote(r), visibility(r.Public))
					})
				},
			},
			{
				Name:      "get",
				Usage:     "fetch a DAG and write it out as files",
				ArgsUsage: "<cid> <new-path>",
				Flags:     []cli.Flag{jsonFlag, fetchTimeoutFlag, publicFlag},
				Action: func(c *cli.Context) error {
					if c.Args().Len() != 2 {
						return usagef("example: gleaner data get bafybei... ./results", "data get needs a CID and a path that does not exist yet")
					}
					p, err := cidParams(c, c.Args().Get(0))
					if err != nil {
						return err
					}
					dir, err := filepath.Abs(c.Args().Get(1))
					if err != nil {
						return err
					}
					var r node.DataFetchResult
					if err := callFetching(c, "data_get", node.DataGetParams{DataCIDParams: p, Dir: dir}, &r, p.CID); err != nil {
						return err
					}
					return emit(c, r, func(w io.Writer) {
						fmt.Fprintf(w, "wrote %s to %s (%s%s)\n", r.CID, r.Path, size(r.Bytes), fetchedNote(r))
					})
				},
			},
			{
				Name:  "ls",
				Usage: "the pinned DAGs and the store's use of its quota",
				Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					var r node.DataListResult
					if err := callCmd(c, "data_ls", struct{}{}, &r); err != nil {
						return err
					}
					return emit(c, r, func(w io.Writer) {
						fmt.Fprintf(w, "store: %s used of %s; %d wants refused since the start (private data asked for by peers not granted it)\n",
							size(r.UsedBytes), size(r.QuotaBytes), r.RefusedWants)
						if len(r.Pins) == 0 {
							fmt.Fprintln(w, "no pins (gleaner data add <path> or gleaner data pin <cid>)")
							return
						}
						rows := [][]string{{"CID", "SIZE", "ACCESS"}}
						for _, p := range r.Pins {
							rows = append(rows, []string{p.CID, size(p.Bytes), visibility(p.Public)})
						}
						table(w, rows)
					})
				},
			},
			{
				Name:      "rm",
				Usage:     "unpin a DAG and free its blocks that no other pin holds",
				ArgsUsage: "<cid>",
				Flags:     []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					cidArg, err := oneCID(c, "rm")
					if err != nil {
						return err
					}
					var r node.DataGCResult
					if err := callCmd(c, "data_rm", node.DataCIDParams{CID: cidArg}, &r); err != nil {
						return err
					}
					return emit(c, r, func(w io.Writer) {
						fmt.Fprintf(w, "unpinned %s; freed %s (%d blocks), %s in use\n", r.CID, size(r.FreedBytes), r.RemovedBlocks, size(r.UsedBytes))
					})
				},
			},
			{
				Name:  "gc",
				Usage: "free every block that no pin holds",
				Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					var r node.DataGCResult
					if err := callCmd(c, "data_gc", struct{}{}, &r); err != nil {
						return err
					}
					return emit(c, r, func(w io.Writer) {
						fmt.Fprintf(w, "freed %s (%d blocks), %s in use\n", size(r.FreedBytes), r.RemovedBlocks, size(r.UsedBytes))
					})
				},
			},
		},
	}
}

func oneCID(c *cli.Context, verb string) (string, error) {
	if c.Args().Len() != 1 {
		return "", usagef("CIDs: gleaner data ls", "data %s needs exactly one CID", verb)
	}
	return c.Args().First(), nil
}

func cidParams(c *cli.Context, cidArg string) (node.DataCIDParams, error) {
	s, err := timeoutSeconds(c)
	return node.DataCIDParams{CID: cidArg, TimeoutS: s, Public: c.Bool("public")}, err
}

// visibility names who may fetch a DAG from this node.
func visibility(public bool) string {
	if public {
		return "public"
	}
	return "private"
}

// timeoutSeconds is --timeout, checked, in the API's whole seconds.
func timeoutSeconds(c *cli.Context) (int, error) {
	d := durationOf(c, "timeout")
	if d < time.Second || d > 24*time.Hour {
		return 0, usagef("for example --timeout 30m", "--timeout %s: use 1s to 24h", d)
	}
	return int(d / time.Second), nil
}

func fetchedNote(r node.DataFetchResult) string {
	if r.Fetched {
		return ", fetched from peers"
	}
	return ", all here already"
}

// size prints bytes in binary units, as quotas are set.
func size(b int64) string { return units.BytesSize(float64(b)) }

func jobFetchCommand() *cli.Command {
	return &cli.Command{
		Name:      "fetch",
		Usage:     "download a job's outputs (its spec's outputs: volume) into a new directory",
		ArgsUsage: "<job-id> <new-dir>",
		Description: `The provider imports the job's outputs volume when the job ends and names
its CID in its signed settlement. fetch gets every block of that CID (from
the provider, or any node holding it), checks each against the CID, and
writes the files. A fetch cut short (Ctrl-C, a crash) resumes: blocks already
here are not fetched again. Providers keep outputs for their retention
window (data.output_retention_hours, a week by default). For a job array,
every completed shard's outputs go under <new-dir>/shard-<index>/.`,
		Flags: []cli.Flag{jsonFlag, fetchTimeoutFlag},
		Action: func(c *cli.Context) error {
			if c.Args().Len() != 2 {
				return usagef("example: gleaner job fetch finetune-3f2a9c ./results", "job fetch needs a job ID and a directory that does not exist yet")
			}
			id := c.Args().Get(0)
			dir, err := filepath.Abs(c.Args().Get(1))
			if err != nil {
				return err
			}
			timeout, err := timeoutSeconds(c)
			if err != nil {
				return err
			}
			var j renting.JobRecord
			if err := callCmd(c, "job_status", node.JobIDParams{ID: id}, &j); err != nil {
				return err
			}
			if j.ArrayView != nil {
				return fetchArray(c, j, dir, timeout)
			}
			var r node.DataFetchResult
			if err := callFetching(c, "job_fetch", node.JobFetchParams{ID: id, Dir: dir, TimeoutS: timeout}, &r, j.Outputs); err != nil {
				return err
			}
			return emit(c, r, func(w io.Writer) {
				fmt.Fprintf(w, "wrote the outputs of %s (%s, %s) to %s\n", id, r.CID, size(r.Bytes), r.Path)
			})
		},
	}
}
