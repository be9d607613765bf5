package p2p

import (
	"net"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Reachability verdicts, what Host.Reachability says (issue 37). They
// combine two answers: AutoNAT's (can a peer dial one of our addresses
// back?) and how our NAT maps ports (does every peer see us at the same
// address and port?), which decides whether hole punching can work.
const (
	// ReachUnknown: no AutoNAT answer yet; it needs connected peers that
	// serve AutoNAT (every node with NAT traversal on does).
	ReachUnknown = "unknown"
	// ReachPublic: peers dial this node directly.
	ReachPublic = "public"
	// ReachPrivate: peers cannot dial this node; how its NAT maps ports
	// is not known yet (fewer than two public peers have seen it).
	ReachPrivate = "private"
	// ReachHolePunch: behind a NAT that keeps one public port for every
	// peer (endpoint-independent mapping), so hole punching (DCUtR) turns
	// a relayed connection into a direct one.
	ReachHolePunch = "nat-holepunch"
	// ReachRelayed: behind a NAT that gives each peer another port
	// (symmetric), so hole punching fails and peers behind NATs reach this
	// node only through a relay.
	ReachRelayed = "relayed"
)

// NAT mapping kinds, from observed addresses (natObservations.mapping).
const (
	mappingUnknown     = "unknown"
	mappingNone        = "none"                 // peers see our own interface address
	mappingIndependent = "endpoint-independent" // every peer sees one address and port
	mappingDependent   = "endpoint-dependent"   // peers see different ports: symmetric NAT
)

// Bounds on what natObservations keeps: a few local sockets (TCP and QUIC
// listeners), a few public observers each; the oldest go first.
const (
	natMaxLocal     = 8
	natMaxObservers = 16
)

// natObservations keeps, per local socket (transport and port), the
// address each public observer saw our connection come from: identify's
// observed address, over direct connections only. libp2p dials from its
// listen port (TCP reuseport, one QUIC socket), so behind an endpoint-
// independent NAT every observer reports the same port, and behind a
// symmetric one (MASQUERADE --random-fully, carrier-grade NATs) each
// reports another. libp2p's own NAT-type guess needs nine observations,
// more than a young network or a home node gives it.
type natObservations struct {
	mu   sync.Mutex
	seen map[string]map[string]observation // local "tcp/4001" -> observer IP -> observed
}

type observation struct {
	addr string // observed ip:port
	self bool   // the observed IP is our own interface's: no NAT on this path
	at   time.Time
}

// record notes one identify answer on conn.
func (o *natObservations) record(conn network.Conn, observed ma.Multiaddr) {
	if conn == nil || observed == nil || isRelayed(conn.RemoteMultiaddr()) {
		return
	}
	remote, local := conn.RemoteMultiaddr(), conn.LocalMultiaddr()
	if !manet.IsPublicAddr(remote) {
		return // a LAN peer sees our LAN address, which says nothing of the NAT
	}
	rip, _, rok := ipPort(remote)
	_, lport, lok := ipPort(local)
	oip, oport, ook := ipPort(observed)
	if !rok || !lok || !ook || transportOf(local) != transportOf(observed) {
		return
	}
	key := transportOf(local) + "/" + lport
	ob := observation{addr: net.JoinHostPort(oip, oport), self: isOwnIP(oip), at: time.Now()}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = make(map[string]map[string]observation)
	}
	m, ok := o.seen[key]
	if !ok {
		if len(o.seen) >= natMaxLocal {
			delete(o.seen, oldestKey(o.seen))
		}
		m = make(map[string]observation)
		o.seen[key] = m
	}
	if _, ok := m[rip]; !ok && len(m) >= natMaxObservers {
		var old string
		for ip, x := range m {
			if old == "" || x.at.Before(m[old].at) {
				old = ip
			}
		}
		delete(m, old)
	}
	m[rip] = ob
}

// mapping judges the NAT from what was recorded: none when observers see
// our own address; endpoint-independent when two or more observers of
// one socket agree on its public address; endpoint-dependent when they
// disagree on every socket that two observers saw. One socket that maps
// independently is enough for hole punching (DCUtR tries every
// transport), so it wins over another that does not.
func (o *natObservations) mapping() (kind string, observers int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	independent, dependent, none := false, false, false
	ips := map[string]bool{}
	for _, m := range o.seen {
		addrs := map[string]bool{}
		for ip, x := range m {
			ips[ip] = true
			addrs[x.addr] = true
			none = none || x.self
		}
		switch {
		case len(m) < 2:
		case len(addrs) == 1:
			independent = true
		default:
			dependent = true
		}
	}
	switch {
	case none:
		return mappingNone, len(ips)
	case independent:
		return mappingIndependent, len(ips)
	case dependent:
		return mappingDependent, len(ips)
	}
	return mappingUnknown, len(ips)
}

func oldestKey(seen map[string]map[string]observation) string {
	keys := make([]string, 0, len(seen))
	newest := map[string]time.Time{}
	for k, m := range seen {
		keys = append(keys, k)
		for _, x := range m {
			if x.at.After(newest[k]) {
				newest[k] = x.at
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return newest[keys[i]].Before(newest[keys[j]]) })
	return keys[0]
}

// isOwnIP reports an address of one of this machine's interfaces (a
// local multiaddr says 0.0.0.0 for a wildcard listener, so it cannot
// tell).
func isOwnIP(ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// ipPort splits /ip4|ip6/<ip>/tcp|udp/<port>/... into its IP and port.
func ipPort(a ma.Multiaddr) (ip, port string, ok bool) {
	if a == nil {
		return "", "", false
	}
	for _, code := range []int{ma.P_IP4, ma.P_IP6} {
		if v, err := a.ValueForProtocol(code); err == nil {
			ip = v
			break
		}
	}
	for _, code := range []int{ma.P_TCP, ma.P_UDP} {
		if v, err := a.ValueForProtocol(code); err == nil {
			port = v
			break
		}
	}
	return ip, port, ip != "" && port != ""
}

func transportOf(a ma.Multiaddr) string {
	if _, err := a.ValueForProtocol(ma.P_TCP); err == nil {
		return "tcp"
	}
	return "udp"
}

// isRelayed reports a circuit-relay address (.../p2p-circuit/...).
func isRelayed(a ma.Multiaddr) bool {
	if a == nil {
		return false
	}
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// verdict combines AutoNAT's answer with the NAT's mapping.
func verdict(autonat, mapping string) string {
	switch autonat {
	case "public":
		return ReachPublic
	case "private":
		switch mapping {
		case mappingIndependent:
			return ReachHolePunch
		case mappingDependent:
			return ReachRelayed
		}
		return ReachPrivate
	}
	return ReachUnknown
}

// NATStatus is what the host knows of its reachability, for doctor and
// `gleaner id`.
type NATStatus struct {
	Verdict   string   // one of the Reach* constants
	AutoNAT   string   // AutoNAT's last answer: unknown, public or private
	Mapping   string   // unknown, none, endpoint-independent, endpoint-dependent
	Observers int      // public peers whose view of our address went into Mapping
	Relays    []string // our relayed (/p2p-circuit) addresses: relays holding a reservation for us
}

// NAT returns the host's reachability and its grounds.
func (h *Host) NAT() NATStatus {
	s := NATStatus{AutoNAT: h.reach.Load().(string)}
	s.Mapping, s.Observers = h.nat.mapping()
	s.Verdict = verdict(s.AutoNAT, s.Mapping)
	for _, a := range h.h.Addrs() {
		if isRelayed(a) {
			s.Relays = append(s.Relays, a.String())
		}
	}
	return s
}

// ReachabilityMeaning says, in one sentence an owner who does not know
// what NAT is can act on, what a verdict means and what to do about it.
func ReachabilityMeaning(v string) (meaning, fix string) {
	switch v {
	case ReachPublic:
		return "other nodes can dial this node directly", ""
	case ReachHolePunch:
		return "this node is behind a router (NAT) that hole punching gets through: peers first reach it through a relay, then connect directly",
			"nothing is needed; forwarding the p2p port (TCP and UDP) on the router, or turning on UPnP/NAT-PMP there, makes it public and saves the relay hop"
	case ReachRelayed:
		return "this node is behind a router (NAT) that changes its port for every peer, so hole punching fails and peers behind other routers reach it only through a relay, which is slower and limited",
			"forward the p2p port (TCP and UDP) on the router to this machine, or turn on UPnP/NAT-PMP in the router's settings"
	case ReachPrivate:
		return "other nodes cannot dial this node; it is behind a router (NAT) or a firewall, and whether hole punching gets through is not known yet",
			"forward the p2p port (TCP and UDP) on the router to this machine, or turn on UPnP/NAT-PMP in the router's settings; otherwise peers reach it through relays"
	}
	return "no peer has told this node yet whether it can be dialled (AutoNAT has no answer)",
		"stay connected to the network a few minutes and ask again"
}
