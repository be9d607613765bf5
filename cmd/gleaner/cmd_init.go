package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/urfave/cli/v2"
)

var networkFlag = &cli.StringFlag{
	Name:  "network",
	Usage: `network to join: "testnet" (the public testnet) or "local" (this machine or LAN, found via mDNS); another name with --private`,
}

// privateFlag makes --network NAME a private network of one's own, which
// finds peers only through --bootstrap: asked for, never made by a typo.
var privateFlag = &cli.BoolFlag{
	Name:  "private",
	Usage: "--network NAME is a private network of your own (peers only through --bootstrap)",
}

// checkNetworkFlag applies node.CheckNetworkChoice to --network as typed,
// as a usage error with the list of networks.
func checkNetworkFlag(c *cli.Context, name string) error {
	if err := repo.CheckNetworkChoice(name, c.Bool("private")); err != nil {
		return usagef(`networks: testnet (the public testnet), local (this machine or LAN); a network of your own: --network NAME --private`, "%v", err)
	}
	return nil
}

func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "create a node repo: identity key, RPC token and a documented config",
		Description: `Creates the repo directory (--repo, default ~/.gleaner) with an Ed25519 identity
(identity.key), an RPC bearer token (rpc.token), both readable only by you,
and config.toml, which explains every setting. An existing repo is never
overwritten.

   gleaner init                          join the public testnet
   gleaner --repo /tmp/n1 init --network local
   gleaner init --network lab-7 --private   a network of your own (peers via --bootstrap)`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "network", Usage: networkFlag.Usage, Value: repo.NetworkTestnet},
			privateFlag,
			jsonFlag,
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("gleaner init takes no arguments; use --repo DIR to choose where", "unexpected argument %q", c.Args().First())
			}
			dir := c.String("repo")
			if err := checkNetworkFlag(c, c.String("network")); err != nil {
				return err
			}
			cfg := repo.DefaultConfig(c.String("network"))
			r, err := repo.InitRepo(dir, cfg)
			if errors.Is(err, repo.ErrRepoExists) {
				return withHint(err, "nothing was changed; use --repo DIR for a second node, or delete the directory to start over")
			}
			if err != nil {
				return err
			}
			id, err := r.PeerID()
			if err != nil {
				return err
			}
			abs, _ := filepath.Abs(dir)
			out := struct {
				Repo    string `json:"repo"`
				PeerID  string `json:"peer_id"`
				Network string `json:"network"`
				Config  string `json:"config"`
			}{abs, id.String(), cfg.Network, filepath.Join(abs, repo.ConfigFile)}
			return emit(c, out, func(w io.Writer) {
				fmt.Fprintf(w, "initialised gleaner repo at %s\n", out.Repo)
				fmt.Fprintf(w, "peer ID:  %s\n", out.PeerID)
				fmt.Fprintf(w, "network:  %s\n", out.Network)
				fmt.Fprintf(w, "config:   %s\n", out.Config)
				fmt.Fprintln(w, "next:     gleaner daemon")
			})
		},
	}
}
