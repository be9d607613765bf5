package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/urfave/cli/v2"
)

func idCommand() *cli.Command {
	return &cli.Command{
		Name:  "id",
		Usage: "show this node's peer ID, addresses, network, version, uptime and reachability",
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("see `gleaner id --help`", "unexpected argument %q", c.Args().First())
			}
			var info node.InfoResult
			if err := callCmd(c, "node_info", nil, &info); err != nil {
				return err
			}
			return emit(c, info, func(w io.Writer) {
				fmt.Fprintf(w, "peer ID:       %s\n", info.PeerID)
				fmt.Fprintf(w, "network:       %s\n", info.Network)
				fmt.Fprintf(w, "version:       %s\n", info.Version)
				fmt.Fprintf(w, "uptime:        %s\n", (time.Duration(info.UptimeSec) * time.Second).String())
				meaning, fix := p2p.ReachabilityMeaning(info.Reachability)
				fmt.Fprintf(w, "reachability:  %s: %s\n", info.Reachability, meaning)
				if fix != "" {
					fmt.Fprintf(w, "               to change it: %s\n", fix)
				}
				fmt.Fprintf(w, "peers:         %d\n", info.Peers)
				whyNoPeers(w, info, "bootstrap:     ", "               ")
				for _, a := range info.Addrs {
					fmt.Fprintf(w, "address:       %s\n", a)
				}
			})
		},
	}
}

func peersCommand() *cli.Command {
	return &cli.Command{
		Name:  "peers",
		Usage: "list the peers this node is connected to",
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("see `gleaner peers --help`", "unexpected argument %q", c.Args().First())
			}
			var peers []node.PeerResult
			if err := callCmd(c, "node_peers", nil, &peers); err != nil {
				return err
			}
			return emit(c, peers, func(w io.Writer) {
				if len(peers) == 0 {
					fmt.Fprintln(w, "no peers connected")
					// Why, when the node knows: the bootstrap's last error
					// and its next try, or that only mDNS and connect find
					// peers on this network.
					var info node.InfoResult
					if callCmd(c, "node_info", nil, &info) == nil && whyNoPeers(w, info, "bootstrap peers ", "") {
						return
					}
					fmt.Fprintln(w, "try `gleaner connect <multiaddr>`, or wait for discovery")
					return
				}
				rows := [][]string{{"PEER ID", "DIRECTION", "TRANSPORT", "LATENCY", "ADDRESS"}}
				for _, p := range peers {
					lat := "-"
					if p.LatencyMS > 0 {
						lat = strconv.FormatFloat(p.LatencyMS, 'f', 2, 64) + " ms"
					}
					rows = append(rows, []string{p.PeerID, p.Direction, p.Transport, lat, strings.Join(p.Addrs, " ")})
				}
				table(w, rows)
				fmt.Fprintf(w, "%d peer(s)\n", len(peers))
			})
		},
	}
}

func connectCommand() *cli.Command {
	return &cli.Command{
		Name:      "connect",
		Usage:     "connect to a peer by multiaddr",
		ArgsUsage: "<multiaddr>",
		Description: `The multiaddr must end in /p2p/<peer-id>; copy one from the other node's
` + "`gleaner id`" + `, for example:

   gleaner connect /ip4/192.0.2.10/tcp/4030/p2p/12D3KooW...`,
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.Args().Len() != 1 {
				return usagef("for example: gleaner connect /ip4/127.0.0.1/tcp/4030/p2p/12D3KooW...", "connect needs exactly one multiaddr")
			}
			var res node.ConnectResult
			if err := callCmd(c, "node_connect", node.ConnectParams{Addr: c.Args().First()}, &res); err != nil {
				return err
			}
			return emit(c, res, func(w io.Writer) { fmt.Fprintf(w, "connected to %s\n", res.PeerID) })
		},
	}
}

func disconnectCommand() *cli.Command {
	return &cli.Command{
		Name:      "disconnect",
		Usage:     "close every connection to a peer",
		ArgsUsage: "<peer-id>",
		Flags:     []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.Args().Len() != 1 {
				return usagef("for example: gleaner disconnect 12D3KooW...", "disconnect needs exactly one peer ID")
			}
			var res node.OK
			if err := callCmd(c, "node_disconnect", node.PeerParams{Peer: c.Args().First()}, &res); err != nil {
				return err
			}
			return emit(c, res, func(w io.Writer) { fmt.Fprintf(w, "disconnected from %s\n", c.Args().First()) })
		},
	}
}

func pingCommand() *cli.Command {
	return &cli.Command{
		Name:      "ping",
		Usage:     "measure round-trip time to a peer (looked up in the DHT when not connected)",
		ArgsUsage: "<peer-id>",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 3, Usage: "number of pings, 1 to 20"},
			jsonFlag,
		},
		Action: func(c *cli.Context) error {
			if c.Args().Len() != 1 {
				return usagef("for example: gleaner ping 12D3KooW... (peer IDs: `gleaner peers`)", "ping needs exactly one peer ID")
			}
			var res node.PingResult
			p := node.PingParams{Peer: c.Args().First(), Count: c.Int("count")}
			if err := callCmd(c, "node_ping", p, &res); err != nil {
				return err
			}
			return emit(c, res, func(w io.Writer) {
				for i, r := range res.RTTsMS {
					fmt.Fprintf(w, "pong %d from %s: %.2f ms\n", i+1, res.PeerID, r)
				}
				fmt.Fprintf(w, "average %.2f ms over %d ping(s)\n", res.AvgMS, len(res.RTTsMS))
			})
		},
	}
}

// whyNoPeers explains an unconnected node: the bootstrap peers not reached
// (with the last error and when it tries again), or the absence of any
// bootstrap list. It reports whether it printed anything.
func whyNoPeers(w io.Writer, info node.InfoResult, first, rest string) bool {
	if b := info.Bootstrap; b != nil && !b.Connected {
		fmt.Fprintf(w, "%snot reached after %d tries: %s\n", first, b.Tries, b.LastError)
		if !b.NextTry.IsZero() {
			fmt.Fprintf(w, "%snext try in %s; meanwhile: gleaner connect <multiaddr>\n", rest, time.Until(b.NextTry).Round(time.Second))
		}
		return true
	}
	if info.Peers == 0 && info.Bootstrap == nil {
		fmt.Fprintf(w, "%s(no bootstrap list: on --network local, peers come through mDNS or gleaner connect)\n", rest)
		return true
	}
	return false
}
