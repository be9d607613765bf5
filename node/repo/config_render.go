package repo

import (
	"fmt"
	"strconv"
	"strings"
)

// Render writes the config as a commented TOML file that a person can edit:
// every setting says what it does and what it accepts.
func (c Config) Render() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# gleaner node configuration. Edit it, then restart `gleaner daemon`.")
	w("# Command-line flags (--network, --listen, --bootstrap, --rpc) override these values for one run.")
	w("")
	w("# Which network to join. Nodes of different networks never talk to each other.")
	w("#   \"local\"   - nodes on this machine or LAN, found through mDNS; for tests and demos")
	w("#   \"testnet\" - the public testnet, joined through its bootstrap nodes")
	w("network = %s", strconv.Quote(c.Network))
	w("")
	w("[p2p]")
	w("# Multiaddrs to listen on: TCP and QUIC. Use port 0 for any free port.")
	w("listen = %s", quoteList(c.P2P.Listen))
	w("# Peers to join the network through (multiaddrs ending in /p2p/<peer-id>, or /dnsaddr/...).")
	w("# Empty means the network's built-in list (the public testnet has one; \"local\" uses mDNS).")
	w("bootstrap = %s", quoteList(c.P2P.Bootstrap))
	w("# Find other nodes on the LAN through multicast DNS.")
	w("mdns = %t", c.P2P.MDNS)
	w("# AutoNAT, UPnP/NAT-PMP port mapping, hole punching and relays, so a node behind a home")
	w("# router is reachable. Turn off only on a host with a public address.")
	w("nat_traversal = %t", c.P2P.NATTraversal)
	w("# Serve as a bootstrap and circuit-relay node for others. Only on a publicly reachable host.")
	w("relay_service = %t", c.P2P.RelayService)
	w("# DHT mode: \"auto\" (server when publicly reachable), \"server\" or \"client\".")
	w("dht_mode = %s", strconv.Quote(c.P2P.DHTMode))
	w("")
	w("[rpc]")
	w("# Where the local JSON-RPC API listens (host:port; port 0 = any free port).")
	w("# The URL actually used is written to <repo>/rpc.url while the daemon runs.")
	w("address = %s", strconv.Quote(c.RPC.Address))
	w("# Allow a non-loopback address above. Anyone who can reach it and holds rpc.token")
	w("# controls this node, so leave this off unless the port is firewalled.")
	w("allow_remote = %t", c.RPC.AllowRemote)
	w("# Web origins (\"https://host:port\", or \"*\" for any) whose requests are admitted. Without")
	w("# an entry, a request with an Origin header other than the API's own loopback one is refused:")
	w("# that is how web pages are kept out. Clients that send no Origin (the CLI, curl) need none.")
	w("allowed_origins = %s", quoteList(c.RPC.AllowedOrigins))
	w("")
	w("[limits]")
	w("# Connection manager: trim connections down to connections_low when above connections_high.")
	w("connections_low = %d", c.Limits.ConnectionsLow)
	w("connections_high = %d", c.Limits.ConnectionsHigh)
	w("# Resource manager ceilings for the libp2p stack.")
	w("max_memory_mb = %d", c.Limits.MaxMemoryMB)
	w("max_file_descriptors = %d", c.Limits.MaxFileDescs)
	w("")
	w("[provider]")
	w("# GPUs come from NVML when the machine has NVIDIA GPUs. On a machine without one, simulate")
	w("# some for local networks and tests, e.g. \"2xRTX4090\" or \"1xH100,2xA100-80GB\". Simulated GPUs")
	w("# are labelled simulated in every offer and output. Prices, calendar and policy are set with")
	w("# `gleaner offer set` and kept in node.db.")
	w("simulate_gpus = %s", strconv.Quote(c.Provider.SimulateGPUs))
	w("")
	w("[market]")
	w("# Offer shards (continent codes af an as eu na oc sa) to follow as a renter; empty = all.")
	w("continents = %s", quoteList(c.Market.Continents))
	w("# Most offers kept in the book; when full, the offer expiring soonest makes room.")
	w("max_offers = %d", c.Market.MaxOffers)
	w("")
	w("[trust]")
	w("# A known-answer job (a spec with verify.expect_sha256, see docs/JOBS.md) that this node, as a")
	w("# renter, sends to a provider it awards a job to: always for a provider it never checked, then")
	w("# less often (1/(1+passes in a row)) down to canary_min_rate, and always again after a failure.")
	w("# Results are probe entries in the ledger and count in reputation. \"\" = no canaries; a relative")
	w("# path is relative to this repo directory.")
	w("canary_spec = %s", strconv.Quote(c.Trust.CanarySpec))
	w("canary_min_rate = %s", strconv.FormatFloat(c.Trust.CanaryMinRate, 'g', -1, 64))
	w("")
	w("[data]")
	w("# The content-addressed block store in <repo>/data (job inputs and outputs, datasets pinned with")
	w("# `gleaner data pin`). A write that would pass the quota is refused; `gleaner data gc` frees")
	w("# what no pin holds.")
	w("quota_gib = %d", c.Data.QuotaGiB)
	w("# As a provider: how long to fetch a job's inputs before it starts (unbilled) before giving up;")
	w("# the renter then auctions the job again elsewhere.")
	w("input_fetch_timeout_s = %d", c.Data.InputFetchTimeoutS)
	w("# As a provider: how long a job's outputs are kept for its renter to fetch; then they are unpinned.")
	w("output_retention_hours = %d", c.Data.OutputRetentionH)
	return b.String()
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
