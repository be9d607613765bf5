package node

import (
	"fmt"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Clock skew thresholds. Offers and leases are signed with expiries of
// minutes: past clockFailSkew a node sees fresh ones as expired (or takes
// stale ones); past clockWarnSkew it is drifting and has no working NTP.
const (
	clockWarnSkewMS = 2_000
	clockFailSkewMS = 30_000
)

// daemonCheckNames are the checks that need the running node.
var daemonCheckNames = []string{"listen", "nat", "clock"}

// DaemonSkipped is the daemon checks when none can run, with why.
func DaemonSkipped(why string) []Check {
	out := make([]Check, len(daemonCheckNames))
	for i, n := range daemonCheckNames {
		out[i] = Check{Name: n, Status: StatusSkip, Detail: "skipped: " + why}
	}
	return out
}

// DaemonChecks judges node_doctor's result.
func DaemonChecks(r DoctorResult) []Check {
	return []Check{listenCheck(r), natCheck(r), clockCheck(r)}
}

func listenCheck(r DoctorResult) Check {
	c := Check{Name: "listen"}
	if len(r.ListenAddrs) == 0 {
		c.Status, c.Detail = StatusFail, "the node listens on no address: no peer can dial it"
		c.Fix = "set p2p.listen in config.toml (e.g. /ip4/0.0.0.0/tcp/4030) or pass --listen, and check nothing else holds the port"
		return c
	}
	c.Status = StatusPass
	c.Detail = fmt.Sprintf("listening on %s; advertising %d address(es)", strings.Join(r.ListenAddrs, ", "), len(r.Addrs))
	if r.Network != NetworkLocal && allLoopback(r.ListenAddrs) {
		c.Status = StatusWarn
		c.Detail += "; all on loopback, so no other machine can reach it"
		c.Fix = "listen on 0.0.0.0 (p2p.listen in config.toml or --listen /ip4/0.0.0.0/tcp/4030)"
	}
	return c
}

func allLoopback(addrs []string) bool {
	for _, s := range addrs {
		m, err := ma.NewMultiaddr(s)
		if err != nil || !manet.IsIPLoopback(m) {
			return false
		}
	}
	return true
}

func natCheck(r DoctorResult) Check {
	c := Check{Name: "nat"}
	switch r.Reachability {
	case "public":
		c.Status, c.Detail = StatusPass, "AutoNAT: public; peers can dial this node directly"
	case "private":
		c.Status = StatusWarn
		c.Detail = "AutoNAT: private; peers reach this node only through relays and hole punching, which is slower and fails more"
		c.Fix = "forward the p2p port (TCP and UDP) on the router to this host, or enable UPnP on the router"
	default:
		c.Status = StatusWarn
		c.Detail = "AutoNAT has no answer yet (" + r.Reachability + "): it needs connected peers that run AutoNAT, and none runs on a local network"
		c.Fix = "stay connected to the network a few minutes and run doctor again"
	}
	return c
}

func clockCheck(r DoctorResult) Check {
	c := Check{Name: "clock"}
	if r.Peers == 0 {
		c.Status, c.Detail = StatusSkip, "skipped: no connected peers to compare clocks with"
		c.Fix = "connect to a peer (gleaner connect <multiaddr>) and run doctor again"
		return c
	}
	answered := 0
	var worst PeerClock
	var firstErr string
	for _, p := range r.Clocks {
		if p.Error != "" {
			if firstErr == "" {
				firstErr = shortPeer(p.PeerID) + ": " + p.Error
			}
			continue
		}
		answered++
		if abs(p.SkewMS) >= abs(worst.SkewMS) {
			worst = p
		}
	}
	if answered == 0 {
		c.Status = StatusWarn
		c.Detail = fmt.Sprintf("none of %d peer(s) asked answered the clock protocol (%s)", len(r.Clocks), firstErr)
		c.Fix = "peers on gleaner older than this one do not answer; try again with other peers"
		return c
	}
	c.Detail = fmt.Sprintf("max |skew| %s over %d peer(s) (%s: %+.1f ms ±%.1f ms)",
		skewText(r.MaxSkewMS), answered, shortPeer(worst.PeerID), worst.SkewMS, worst.RTTMS/2)
	fix := "sync this host's clock with NTP (sudo timedatectl set-ntp true; or chrony); if only one peer is off, its clock is the wrong one"
	switch {
	case r.MaxSkewMS > clockFailSkewMS:
		c.Status, c.Fix = StatusFail, fix
		c.Detail += fmt.Sprintf("; over %d s, signed offers and leases look expired or stale", clockFailSkewMS/1000)
	case r.MaxSkewMS > clockWarnSkewMS:
		c.Status, c.Fix = StatusWarn, fix
		c.Detail += fmt.Sprintf("; over %d s", clockWarnSkewMS/1000)
	default:
		c.Status = StatusPass
	}
	return c
}

func skewText(msv float64) string {
	if msv >= 1000 {
		return fmt.Sprintf("%.1f s", msv/1000)
	}
	return fmt.Sprintf("%.1f ms", msv)
}

func shortPeer(id string) string {
	if len(id) > 16 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}
