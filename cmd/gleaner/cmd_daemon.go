package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/urfave/cli/v2"
)

// shutdownBudget is how long a clean shutdown may take before the daemon
// gives up waiting and exits anyway.
const shutdownBudget = 5 * time.Second

func daemonCommand() *cli.Command {
	return &cli.Command{
		Name:  "daemon",
		Usage: "run this machine's node until Ctrl-C",
		Description: `Joins the mesh (libp2p: TCP and QUIC, kad-dht, gossipsub) and serves the local
JSON-RPC API. While it runs, <repo>/rpc.url holds the API's URL. Flags
override config.toml for this run only. One daemon per repo.

   gleaner daemon
   gleaner daemon --init --network testnet       create the repo first if needed
   gleaner daemon --listen /ip4/127.0.0.1/tcp/0 --rpc 127.0.0.1:0
   gleaner daemon --relay                        serve as a public bootstrap/relay node
   gleaner daemon --metrics 127.0.0.1:4032 --log-format json
                                                 Prometheus metrics, JSON logs (docs/OPERATIONS.md)`,
		Flags: []cli.Flag{
			networkFlag,
			privateFlag,
			&cli.StringSliceFlag{Name: "listen", Usage: "p2p listen multiaddr (repeatable), e.g. /ip4/0.0.0.0/tcp/4030"},
			&cli.StringSliceFlag{Name: "bootstrap", Usage: "bootstrap peer multiaddr ending in /p2p/<id> (repeatable); replaces the built-in list"},
			&cli.StringFlag{Name: "rpc", Usage: "JSON-RPC listen host:port (port 0 = any free port)"},
			&cli.BoolFlag{Name: "rpc-allow-remote", Usage: "allow --rpc on a non-loopback address (dangerous: the token is the only protection)"},
			&cli.BoolFlag{Name: "relay", Usage: "serve as a bootstrap and circuit-relay node (publicly reachable hosts only)"},
			&cli.BoolFlag{Name: "mdns", Usage: "find LAN peers through mDNS (default: on for the local network)"},
			&cli.StringFlag{Name: "simulate-gpus", Usage: "on a machine without a GPU, sell labelled simulated ones, e.g. 2xRTX4090 or 1xH100,2xA100-80GB"},
			&cli.BoolFlag{Name: "init", Usage: "create the repo first when it does not exist"},
			&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:4032 (port 0 = any free port; \"\" = off); overrides metrics.address"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "the log lines on stderr: text (key=value) or json (one object a line)"},
			jsonFlag,
		},
		Action: runDaemon,
	}
}

func runDaemon(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("see `gleaner daemon --help`", "unexpected argument %q", c.Args().First())
	}
	logger, err := newLogger(c.App.ErrWriter, c.String("log-level"), c.String("log-format"))
	if err != nil {
		return err
	}
	rp, err := daemonRepo(c)
	if err != nil {
		return err
	}
	cfg, err := rp.Config()
	if err != nil {
		return withHint(err, "fix config.toml; every setting is explained in it")
	}
	if err := applyDaemonFlags(c, &cfg); err != nil {
		return err
	}
	n, err := node.New(rp, cfg, node.Options{Logger: logger})
	if err != nil {
		return usagef("see `gleaner daemon --help`", "%v", err)
	}
	if err := n.Start(c.Context); err != nil {
		if errors.Is(err, repo.ErrRepoLocked) {
			return withHint(fmt.Errorf("another gleaner daemon is already running on the repo at %s", rp.Dir), "stop it first, or use --repo DIR for a second node")
		}
		return err
	}
	if err := printReady(c, n); err != nil {
		_ = n.Stop(context.Background())
		return err
	}
	<-c.Context.Done()
	// A second Ctrl-C now kills the process at once.
	signal.Reset(syscall.SIGINT, syscall.SIGTERM)
	logger.Info("shutting down", "budget", shutdownBudget)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		return fmt.Errorf("unclean shutdown: %w", err)
	}
	logger.Info("stopped cleanly")
	return nil
}

func daemonRepo(c *cli.Context) (*repo.Repo, error) {
	dir := c.String("repo")
	r, err := repo.OpenRepo(dir)
	if errors.Is(err, repo.ErrNoRepo) && c.Bool("init") {
		network := c.String("network")
		if network == "" {
			network = repo.NetworkTestnet
		}
		if err := checkNetworkFlag(c, network); err != nil {
			return nil, err
		}
		return repo.InitRepo(dir, repo.DefaultConfig(network))
	}
	if errors.Is(err, repo.ErrNoRepo) {
		return nil, withHint(fmt.Errorf("no gleaner repo at %s", dir), "create one with `gleaner init`, or run `gleaner daemon --init`")
	}
	return r, err
}

func applyDaemonFlags(c *cli.Context, cfg *repo.Config) error {
	if c.IsSet("network") {
		// The repo's own network was chosen at init; a new name typed
		// here gets the same check as there.
		if n := c.String("network"); n != cfg.Network {
			if err := checkNetworkFlag(c, n); err != nil {
				return err
			}
		}
		cfg.Network = c.String("network")
		if !c.IsSet("mdns") {
			cfg.P2P.MDNS = cfg.Network == repo.NetworkLocal
		}
	}
	if c.IsSet("listen") {
		cfg.P2P.Listen = c.StringSlice("listen")
	}
	if c.IsSet("bootstrap") {
		cfg.P2P.Bootstrap = c.StringSlice("bootstrap")
	}
	if c.IsSet("rpc") {
		cfg.RPC.Address = c.String("rpc")
	}
	if c.IsSet("rpc-allow-remote") {
		cfg.RPC.AllowRemote = c.Bool("rpc-allow-remote")
	}
	if c.IsSet("metrics") {
		cfg.Metrics.Address = c.String("metrics")
	}
	if c.Bool("relay") {
		cfg.P2P.RelayService = true
		cfg.P2P.DHTMode = "server"
	}
	if c.IsSet("mdns") {
		cfg.P2P.MDNS = c.Bool("mdns")
	}
	if c.IsSet("simulate-gpus") {
		cfg.Provider.SimulateGPUs = c.String("simulate-gpus")
	}
	if err := cfg.Validate(); err != nil {
		return usagef("see `gleaner daemon --help`", "%v", err)
	}
	return nil
}

func printReady(c *cli.Context, n *node.Node) error {
	h := n.Host()
	addrs := make([]string, 0)
	for _, a := range h.Addrs() {
		addrs = append(addrs, a.String())
	}
	out := struct {
		Event   string   `json:"event"`
		PeerID  string   `json:"peer_id"`
		Network string   `json:"network"`
		Addrs   []string `json:"addrs"`
		RPCURL  string   `json:"rpc_url"`
		Metrics string   `json:"metrics_url,omitempty"`
		Repo    string   `json:"repo"`
	}{"ready", h.ID().String(), n.Network(), addrs, n.RPCURL(), n.MetricsURL(), n.Repo().Dir}
	return emit(c, out, func(w io.Writer) {
		fmt.Fprintf(w, "gleaner daemon ready\n")
		fmt.Fprintf(w, "peer ID:  %s\n", out.PeerID)
		fmt.Fprintf(w, "network:  %s\n", out.Network)
		fmt.Fprintf(w, "rpc:      %s\n", out.RPCURL)
		if out.Metrics != "" {
			fmt.Fprintf(w, "metrics:  %s\n", out.Metrics)
		}
		for _, a := range out.Addrs {
			fmt.Fprintf(w, "listen:   %s\n", a)
		}
		fmt.Fprintln(w, "Press Ctrl-C to stop.")
	})
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, usagef("use debug, info, warn or error", "--log-level %q is not a level", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("use text or json", "--log-format %q is not a format", format)
}
