package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/testnet"
	"github.com/urfave/cli/v2"
)

func testnetCommand() *cli.Command {
	return &cli.Command{
		Name:  "testnet",
		Usage: "run a whole local gleaner network on this machine",
		Subcommands: []*cli.Command{{
			Name:  "up",
			Usage: "start N daemons on loopback, connected to each other, until Ctrl-C",
			Description: `Each node gets its own repo (in a temporary directory unless --dir is given)
and free ports on 127.0.0.1. The nodes join a private network of this run's
own (--network, default tn- and 6 random hex digits), so two testnets on one
host never merge. The table shows every node's peer ID, RPC URL and repo;
talk to one with: gleaner --repo <repo> peers (the repo knows its network).
With --providers, the first nodes sell SIMULATED GPUs and their offers allow
--workloads (batch and service: run make images first, then
gleaner --repo <repo> service up docs/examples/service.yaml).
Ctrl-C stops every node and leaves nothing running.

   gleaner testnet up --nodes 5
   gleaner testnet up --nodes 4 --providers 2 --workloads batch
   gleaner testnet up --nodes 3 --network lab-1 --run-for 30s --json`,
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "nodes", Aliases: []string{"n"}, Value: 3, Usage: "number of nodes, 1 to 64"},
				&cli.IntFlag{Name: "providers", Usage: "how many nodes sell SIMULATED GPUs, with offers set (a market to query)"},
				&cli.StringFlag{Name: "workloads", Value: defaultTestnetWorkloads, Usage: "what the providers' offers allow: batch, service or batch,service"},
				&cli.StringFlag{Name: "network", Usage: "the nodes' network name (default: a fresh private one, tn-XXXXXX; local and testnet join those)"},
				&cli.StringFlag{Name: "dir", Usage: "keep the repos in this directory (default: a temporary one, removed on exit)"},
				durationFlag("run-for", 0, "stop by itself after this long (default: run until Ctrl-C)"),
				&cli.StringFlag{Name: "job", Usage: "once the market is up, rent a GPU from the last node with this job spec and follow it"},
				jsonFlag,
			},
			Action: runTestnetUp,
		}},
	}
}

func runTestnetUp(c *cli.Context) error {
	n := c.Int("nodes")
	if n < 1 || n > 64 {
		return usagef("for example: gleaner testnet up --nodes 5", "--nodes %d: use 1 to 64", n)
	}
	if p := c.Int("providers"); p < 0 || p > n {
		return usagef("for example: gleaner testnet up --nodes 5 --providers 3", "--providers %d: use 0 to --nodes (%d)", p, n)
	}
	workloads, err := parseWorkloads(c.String("workloads"))
	if err != nil {
		return usagef("for example: gleaner testnet up --providers 2 --workloads batch,service", "%v", err)
	}
	network, err := testnetNetwork(c.String("network"))
	if err != nil {
		return usagef(`a network name matches ^[a-z0-9][a-z0-9-]{0,31}$, for example --network lab-1; leave it out for a fresh private one`, "%v", err)
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	progress := c.App.ErrWriter
	fmt.Fprintf(progress, "starting %d nodes on network %s...\n", n, network)
	l, err := testnet.Up(c.Context, testnet.UpOptions{Binary: bin, Nodes: n, Dir: c.String("dir"), Network: network,
		Providers: c.Int("providers"), Workloads: workloads})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintf(progress, "stopping %d nodes...\n", len(l.Procs))
		if err := l.Down(); err != nil {
			fmt.Fprintf(progress, "warning: %v\n", err)
		}
		fmt.Fprintln(progress, "all nodes stopped")
	}()
	counts := waitMesh(c.Context, l, progress)
	out := struct {
		Network   string          `json:"network"`
		Workloads []string        `json:"workloads"`
		Dir       string          `json:"dir"`
		Nodes     []*testnet.Proc `json:"nodes"`
		Peers     []int           `json:"peers"`
	}{l.Network, workloads, l.Dir(), l.Procs, counts}
	_ = emit(c, out, func(w io.Writer) {
		rows := [][]string{{"NODE", "PEER ID", "PEERS", "RPC URL", "REPO"}}
		for i, p := range l.Procs {
			rows = append(rows, []string{strconv.Itoa(i), p.PeerID, strconv.Itoa(counts[i]), p.RPCURL, p.Repo})
		}
		fmt.Fprintf(w, "network: %s\n", l.Network)
		table(w, rows)
		last := l.Procs[len(l.Procs)-1].Repo
		fmt.Fprintf(w, "\ntry: gleaner --repo %s peers\n", last)
		if c.Int("providers") > 0 {
			fmt.Fprintf(w, "     gleaner --repo %s market offers 'simulated=true' -o price.bronze\n", last)
			if slices.Contains(workloads, "service") {
				fmt.Fprintf(w, "     gleaner --repo %s service up docs/examples/service.yaml   (after make images)\n", last)
			}
		}
		fmt.Fprintf(w, "join: %s\n", joinCommand(l))
	})
	if p := c.Int("providers"); p > 0 && !c.Bool("json") {
		showMarket(c, l, p)
	}
	if spec := c.String("job"); spec != "" {
		if err := demoJob(c, l, spec); err != nil {
			return err
		}
	}
	wait := c.Context.Done()
	if d := durationOf(c, "run-for"); d > 0 {
		ctx, cancel := context.WithTimeout(c.Context, d)
		defer cancel()
		wait = ctx.Done()
		fmt.Fprintf(progress, "running for %s (Ctrl-C stops earlier)\n", d)
	} else {
		fmt.Fprintln(progress, "press Ctrl-C to stop every node")
	}
	<-wait
	return nil
}

// waitMesh polls until every node is connected to every other, or 30 s have
// passed, showing progress as nodes find each other.
func waitMesh(ctx context.Context, l *testnet.Local, progress io.Writer) []int {
	want := len(l.Procs) - 1
	deadline := time.Now().Add(30 * time.Second)
	var counts []int
	last := ""
	for {
		cs, err := l.PeerCounts(ctx)
		if err == nil {
			counts = cs
			line := fmt.Sprint(cs)
			if line != last {
				fmt.Fprintf(progress, "peers per node: %s (full mesh: %d each)\n", line, want)
				last = line
			}
			if minInt(cs) >= want {
				return cs
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if counts == nil {
				counts = make([]int, len(l.Procs))
			}
			return counts
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func minInt(xs []int) int {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

// showMarket waits until the last node's book holds every provider's offer
// and prints it: the demo's proof that supply reached a renter.
func showMarket(c *cli.Context, l *testnet.Local, providers int) {
	last := len(l.Procs) - 1
	cl, err := l.Client(last)
	if err != nil {
		return
	}
	var res node.MarketOffersResult
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && c.Context.Err() == nil {
		if err := cl.Call(c.Context, "market_offers", node.MarketOffersParams{Order: "price.bronze"}, &res); err == nil && len(res.Offers) >= providers {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintf(c.App.Writer, "\nthe market as node %d sees it (gleaner market offers -o price.bronze):\n", last)
	printOffers(c.App.Writer, res, false, "in effect now")
}

// demoJob rents a GPU from the last node: the whole market in one step.
func demoJob(c *cli.Context, l *testnet.Local, path string) error {
	spec, err := os.ReadFile(path)
	if err != nil {
		return usagef("", "--job: %v", err)
	}
	last := len(l.Procs) - 1
	cl, err := l.Client(last)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "\nnode %d rents a GPU: gleaner job run %s\n", last, path)
	if err := submitAndFollow(c, &nodeClient{Client: cl, dir: l.Procs[last].Repo}, spec, submitExtras{}, true); err != nil {
		return err
	}
	showTrust(c, cl, last)
	return nil
}

// showTrust prints what the renter's ledger now says: the provider's
// reputation (claim, outcome, payment) and the renter's own balance. The
// settlement arrives from the provider's feed, so it waits a little.
func showTrust(c *cli.Context, cl *rpc.Client, renter int) {
	var jobs []renting.JobRecord
	if err := cl.Call(c.Context, "job_list", nil, &jobs); err != nil || len(jobs) == 0 || jobs[0].Provider == "" {
		return
	}
	var ev trust.Evidence
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && c.Context.Err() == nil {
		if cl.Call(c.Context, "rep_show", node.PeerParamsRep{Peer: jobs[0].Provider}, &ev) == nil && ev.Score != nil && ev.PaidTotal > 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Fprintf(c.App.Writer, "\nnode %d's ledger on the provider (gleaner rep show %s):\n", renter, shortID(ev.Peer))
	printEvidence(c.App.Writer, ev)
	var b node.BalanceResult
	if cl.Call(c.Context, "ledger_balance", nil, &b) == nil {
		fmt.Fprintf(c.App.Writer, "node %d's balance: %s testnet credits (faucet %s - spent %s)\n", renter,
			auction.FormatCredits(b.Balance), auction.FormatCredits(b.Faucet), auction.FormatCredits(b.Spent))
	}
}
