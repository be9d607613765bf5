package p2p

import (
	"errors"
	"net"
	"slices"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Why mDNS is not running yet. Neither is final: the runner looks again,
// because listen addresses and interfaces come and go while a node runs.
var (
	// errMDNSNoAddrs: libp2p's mDNS service puts the host's listen
	// addresses in its records and refuses to start without one ("didn't
	// find any IP addresses"). A host is in this state from its creation
	// until Listen, which is when issue 15's daemons started mDNS, once.
	errMDNSNoAddrs = errors.New("the host has no IP listen address yet")
	// errMDNSNoMulticast: zeroconf sends and joins the mDNS group only on
	// interfaces that are up and have the MULTICAST flag.
	errMDNSNoMulticast = errors.New("no multicast-capable network interface is up; " +
		"LAN peers will not be found automatically until one is: " +
		"use `gleaner connect <multiaddr>` or set p2p.bootstrap in config.toml")
)

// mdnsPlan is what an mDNS service started now would announce and where.
// Its key changes exactly when a running service has gone stale: libp2p's
// service fixes its records, and zeroconf its interfaces, at Start.
type mdnsPlan struct {
	addrs  []ma.Multiaddr // the IP listen addresses the records will carry
	ifaces []string       // "eth0 (192.0.2.2, fd00::2)", for the log
	key    string
}

// planMDNS decides from the host's interface listen addresses (listen
// addresses with 0.0.0.0 already expanded, as libp2p's mDNS reads them) and
// the machine's interfaces whether mDNS can run, and if not, why.
// addrsOf lists an interface's addresses; it is net.Interface.Addrs in
// production and a fake in tests.
func planMDNS(listen []ma.Multiaddr, ifaces []net.Interface, addrsOf func(net.Interface) []string) (mdnsPlan, error) {
	var p mdnsPlan
	for _, a := range listen {
		if ip, err := manet.ToIP(a); err == nil && !ip.IsUnspecified() {
			p.addrs = append(p.addrs, a)
		}
	}
	if len(p.addrs) == 0 {
		return p, errMDNSNoAddrs
	}
	for _, ifi := range ifaces {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 || containerPlumbing(ifi.Name) {
			continue
		}
		desc := ifi.Name
		if ips := addrsOf(ifi); len(ips) > 0 {
			desc += " (" + strings.Join(ips, ", ") + ")"
		}
		p.ifaces = append(p.ifaces, desc)
	}
	if len(p.ifaces) == 0 {
		return p, errMDNSNoMulticast
	}
	keys := make([]string, 0, len(p.addrs)+len(p.ifaces))
	for _, a := range p.addrs {
		keys = append(keys, a.String())
	}
	slices.Sort(keys)
	keys = append(keys, p.ifaces...)
	p.key = strings.Join(keys, "|")
	return p, nil
}

// loopbackOnly reports whether every address in the plan is a loopback one:
// mDNS then still works between nodes on this machine, but no other
// machine can dial what it announces.
func (p mdnsPlan) loopbackOnly() bool {
	for _, a := range p.addrs {
		if ip, err := manet.ToIP(a); err == nil && !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// interfaceIPs lists an interface's addresses without their prefix length.
func interfaceIPs(ifi net.Interface) []string {
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		s := a.String()
		if i := strings.IndexByte(s, '/'); i >= 0 {
			s = s[:i]
		}
		out = append(out, s)
	}
	return out
}

// containerPlumbing reports whether an interface is one a container engine
// makes for its containers (a veth per container, Docker's bridges and our
// service networks' glsvc bridges, CNI's): never a LAN with peers on it,
// and one comes and goes with every job, which must not restart mDNS.
func containerPlumbing(name string) bool {
	for _, prefix := range []string{"veth", "docker", "br-", "glsvc", "cni", "flannel", "cali"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
