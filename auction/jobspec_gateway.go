package auction

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ServiceGateway is where the renter's node serves a service: the
// renter's business alone. A replica's own spec leaves it out (the node's
// replicaSpec), so no provider learns the renter's addresses, and the
// replicas' hashes do not depend on it.
type ServiceGateway struct {
	// Listen is host:port as ParseGatewayListen writes it; "" is
	// 127.0.0.1 on the port `service up` is given (any free one).
	Listen string
	// Hosts are names besides loopback ones and the listen address that a
	// call's Host and Origin may carry (the machine's LAN name).
	Hosts []string
}

// IsZero reports a gateway section left out.
func (g ServiceGateway) IsZero() bool { return g.Listen == "" && len(g.Hosts) == 0 }

const maxGatewayHosts = 16

var gatewaySchema = []specField{
	{name: "listen", typ: "string", def: "127.0.0.1:0", help: "host:port your node's gateway listens on: 127.0.0.1 (this machine only), an IP address of this machine, or 0.0.0.0 / [::] for every interface; port 0 is any free one. Beyond loopback every call needs the service's bearer token (docs/SERVICES.md). `service up --listen` overrides it",
		set: strVal(func(s *JobSpec) *string { return &svc(s).Gateway.Listen }, ParseGatewayListen)},
	{name: "hosts", typ: "list of strings", def: "none", help: "names such as gpubox.lan that calls may carry in Host and Origin, besides loopback names and the listen address; at most 16",
		set: listVal(func(s *JobSpec) *[]string { return &svc(s).Gateway.Hosts }, maxGatewayHosts, true, validGatewayHost)},
}

// ParseGatewayListen checks a gateway's listen address and writes it in
// one form: host:port, the host an IP address (localhost is 127.0.0.1),
// the port 0..65535. A name other than localhost is refused: the gateway
// listens on an address, and a name calls carry belongs in hosts.
func ParseGatewayListen(s string) (string, error) {
	const want = "want host:port such as 127.0.0.1:8080, 192.168.1.20:8080, 0.0.0.0:8080 or [::]:8080"
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%q: %s", s, want)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", fmt.Errorf("%q: port %q: want 0..65535 (0: any free port)", s, port)
	}
	if host == "" {
		return "", fmt.Errorf("%q: name the host: 0.0.0.0 (or [::]) for every interface, 127.0.0.1 for this machine only", s)
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("%q: the host must be an IP address of this machine, 0.0.0.0 or [::]; a name that calls carry goes in service.gateway.hosts", s)
	}
	if ip = ip.Unmap(); ip.IsMulticast() {
		return "", fmt.Errorf("%q: a multicast address: %s", s, want)
	}
	if ip.Zone() != "" {
		// A URL would have to write the zone as %25eth0; [::] serves the
		// link-local address too.
		return "", fmt.Errorf("%q: an address with a zone: use [::] (every interface) instead", s)
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(p, 10)), nil
}

// validGatewayHost is a DNS name (letters, digits, hyphens, dots; labels
// of 1..63) or an IP address, in lower case.
func validGatewayHost(s string) (string, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.String(), nil
	}
	h := strings.ToLower(strings.TrimSuffix(s, "."))
	bad := h == "" || len(h) > 253
	for _, label := range strings.Split(h, ".") {
		bad = bad || label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-'
		for i := 0; i < len(label) && !bad; i++ {
			c := label[i]
			bad = !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
		}
	}
	if bad {
		return "", fmt.Errorf("%q: want a host name such as gpubox.lan or an IP address, no port", s)
	}
	return h, nil
}

func encodeGateway(m *yaml.Node, g ServiceGateway) {
	if g.IsZero() {
		return
	}
	gm := yMap()
	gm.Style = yaml.FlowStyle
	if g.Listen != "" {
		yAdd(gm, "listen", yStr(g.Listen))
	}
	if len(g.Hosts) > 0 {
		yAdd(gm, "hosts", yStrList(g.Hosts, yaml.FlowStyle))
	}
	yAdd(m, "gateway", gm)
}
