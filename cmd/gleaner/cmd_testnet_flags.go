package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/testnet"
)

// defaultTestnetWorkloads is what a local testnet's providers allow: both
// kinds, so that `gleaner service up` works on one out of the box.
var defaultTestnetWorkloads = strings.Join(auction.Workloads, ",")

// parseWorkloads reads testnet up's --workloads: a comma-separated set of
// auction.Workloads, none repeated, at least one.
func parseWorkloads(s string) ([]string, error) {
	valid := strings.Join(auction.Workloads, ", ")
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
			continue
		case !slices.Contains(auction.Workloads, w):
			return nil, fmt.Errorf("--workloads: unknown workload %q (valid: %s)", w, valid)
		case slices.Contains(out, w):
			return nil, fmt.Errorf("--workloads: %q given twice", w)
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--workloads: name at least one of %s", valid)
	}
	return out, nil
}

// testnetNetwork is testnet up's --network: empty means a fresh private
// name of this run's own; a name given must be a valid network name
// (^[a-z0-9][a-z0-9-]{0,31}$, the p2p rule) and not the reserved mainnet.
// "local" and "testnet" join those networks; any other name is private.
func testnetNetwork(name string) (string, error) {
	if name == "" {
		return testnet.NewNetworkName(), nil
	}
	private := name != repo.NetworkLocal && name != repo.NetworkTestnet
	if err := repo.CheckNetworkChoice(name, private); err != nil {
		return "", fmt.Errorf("--network: %w", err)
	}
	return name, nil
}

// joinCommand is how another node joins a running testnet: its network
// (private unless local or testnet) and node 0 as bootstrap peer.
func joinCommand(l *testnet.Local) string {
	private := ""
	if l.Network != repo.NetworkLocal && l.Network != repo.NetworkTestnet {
		private = " --private"
	}
	return fmt.Sprintf("gleaner --repo DIR daemon --init --network %s%s --bootstrap %s", l.Network, private, l.Procs[0].Addr)
}
