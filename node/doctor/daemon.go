package doctor

import (
	"fmt"
	"strings"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/p2p"
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
func DaemonChecks(r Result) []Check {
	return []Check{listenCheck(r), natCheck(r), clockCheck(r)}
}

func listenCheck(r Result) Check {
	c := Check{Name: "listen"}
	if len(r.ListenAddrs) == 0 {
		c.Status, c.Detail = StatusFail, "the node listens on no address: no peer can dial it"
		c.Fix = "set p2p.listen in config.toml (e.g. /ip4/0.0.0.0/tcp/4030) or pass --listen, and check nothing else holds the port"
		return c
	}
	c.Status = StatusPass
	c.Detail = fmt.Sprintf("listening on %s; advertising %d address(es)", strings.Join(r.ListenAddrs, ", "), len(r.Addrs))
	if r.Network != repo.NetworkLocal && allLoopback(r.ListenAddrs) {
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

// natCheck judges the node's reachability verdict (p2p.Host.NAT): what
// AutoNAT answered and how the NAT maps ports, said in one sentence an
// owner who does not know what NAT is can act on.
func natCheck(r Result) Check {
	c := Check{Name: "nat"}
	meaning, fix := p2p.ReachabilityMeaning(r.Reachability)
	relayed := hasRelayAddr(r.Addrs)
	switch r.Reachability {
	case p2p.ReachPublic:
		c.Status, c.Detail = StatusPass, "public: "+meaning
		return c
	case p2p.ReachHolePunch:
		c.Status = StatusPass
	case p2p.ReachUnknown:
		c.Status = StatusWarn
		if r.Network == repo.NetworkLocal {
			meaning += "; on the local network no node runs AutoNAT"
		}
	default: // private, relayed
		c.Status = StatusWarn
	}
	c.Detail, c.Fix = r.Reachability+": "+meaning, fix
	if r.Reachability != p2p.ReachUnknown {
		if relayed {
			c.Detail += "; a relay holds a slot for it"
		} else {
			// Behind a NAT with no relay, peers behind other NATs
			// cannot reach it at all.
			c.Status = StatusWarn
			c.Detail += "; but no relay holds a slot for it yet, so peers behind other routers cannot reach it"
			c.Fix = "wait a minute for a relay (any node started with --relay); if none appears, " + fix
		}
	}
	return c
}

// hasRelayAddr reports a /p2p-circuit address among addrs.
func hasRelayAddr(addrs []string) bool {
	for _, a := range addrs {
		if strings.Contains(a, "/p2p-circuit") {
			return true
		}
	}
	return false
}

// clockCheck judges this host's clock by the median skew of the peers that
// answered, computed here from r.Clocks: one peer, wrong or lying, cannot
// move a median of three or more, so it cannot fail this host; peers far
// from the median are named as outliers instead. One answer alone is no
// majority: it can warn, never fail.
func clockCheck(r Result) Check {
	c := Check{Name: "clock"}
	if r.Peers == 0 {
		c.Status, c.Detail = StatusSkip, "skipped: no connected peers to compare clocks with"
		c.Fix = "connect to a peer (gleaner connect <multiaddr>) and run doctor again"
		return c
	}
	var answered []PeerClock
	var firstErr string
	for _, p := range r.Clocks {
		if p.Error != "" {
			if firstErr == "" {
				firstErr = p2p.ShortID(p.PeerID) + ": " + p.Error
			}
			continue
		}
		answered = append(answered, p)
	}
	if len(answered) == 0 {
		c.Status = StatusWarn
		c.Detail = fmt.Sprintf("none of %d peer(s) asked answered the clock protocol (%s)", len(r.Clocks), firstErr)
		c.Fix = "peers on gleaner older than this one do not answer; try again with other peers"
		return c
	}
	median, _ := SkewStats(answered)
	var outliers []string
	for _, p := range answered {
		if abs(p.SkewMS-median) > clockWarnSkewMS {
			outliers = append(outliers, p2p.ShortID(p.PeerID)+" "+skewText(p.SkewMS))
		}
	}
	c.Detail = fmt.Sprintf("median skew %s over %d peer(s)", skewText(median), len(answered))
	if len(outliers) > 0 {
		c.Detail += fmt.Sprintf("; outlier(s) far from the median, their clocks not this host's: %s", strings.Join(outliers, ", "))
	}
	fix := "sync this host's clock with NTP (sudo timedatectl set-ntp true; or chrony)"
	switch m := abs(median); {
	case m > clockFailSkewMS && len(answered) > 1:
		c.Status, c.Fix = StatusFail, fix
		c.Detail += fmt.Sprintf("; over %d s, signed offers and leases look expired or stale", clockFailSkewMS/1000)
	case m > clockWarnSkewMS:
		c.Status, c.Fix = StatusWarn, fix
		c.Detail += fmt.Sprintf("; over %d s", clockWarnSkewMS/1000)
		if len(answered) == 1 {
			c.Detail += "; only one peer answered, and its clock may be the wrong one"
			c.Fix += ", or connect to more peers and run doctor again to see whose clock is off"
		}
	default:
		c.Status = StatusPass
	}
	return c
}

// skewText is a signed skew in ms, in seconds from one second up.
func skewText(msv float64) string {
	if abs(msv) >= 1000 {
		return fmt.Sprintf("%+.1f s", msv/1000)
	}
	return fmt.Sprintf("%+.1f ms", msv)
}
