package gateway

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// FuzzGatewayHostOrigin: the gateway's checks never panic on any Host,
// Origin and Authorization; a refusal is 403 or 401 with one short line;
// and what is admitted is what guard.go promises. On loopback with no
// token: a loopback Host, and no Origin or an http(s) one on a loopback
// host. Listening on a wildcard address with a token and Hosts: a Host
// that is loopback, an IP literal or one of Hosts; an Origin on a
// loopback host or one of Hosts; and exactly the token.
func FuzzGatewayHostOrigin(f *testing.F) {
	for _, s := range [][3]string{
		{"127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"localhost", "http://localhost:3000", "Bearer tok"},
		{"[::1]:80", "https://[::1]", "bearer tok"},
		{"attacker.example", "http://attacker.example", "Bearer tok"},
		{"gpu.lan:9000", "http://GPU.LAN:9000/", "Bearer  tok"},
		{"192.168.1.5", "http://192.168.1.9", "Basic tok"},
		{"127.0.0.1.nip.io", "null", "Bearer tokx"},
		{"", "*", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	local := newAccess(Config{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080})
	lan := newAccess(Config{Token: "tok", Hosts: []string{"gpu.lan"}}, &net.TCPAddr{IP: net.IPv4zero, Port: 9000})
	f.Fuzz(func(t *testing.T, host, origin, auth string) {
		r := &http.Request{Host: host, Header: http.Header{"Origin": {origin}, "Authorization": {auth}}}
		originHost := func() (string, bool) {
			if origin == "" {
				return "", true
			}
			c, err := rpc.CanonicalOrigin(origin)
			if err != nil || c == "*" {
				return "", false
			}
			u, err := url.Parse(c)
			return rpc.HostName(u.Host), err == nil
		}
		for _, a := range []*access{local, lan} {
			status, msg := a.refusal(r)
			if status == 0 {
				continue
			}
			if (status != http.StatusForbidden && status != http.StatusUnauthorized) || strings.ContainsAny(msg, "\r\n") || len(msg) > 600 {
				t.Fatalf("refusal %d %q", status, msg)
			}
		}
		h := rpc.HostName(host)
		if status, _ := local.refusal(r); status == 0 {
			oh, ok := originHost()
			if !rpc.LoopbackHost(h) || !ok || (oh != "" && !rpc.LoopbackHost(oh)) {
				t.Fatalf("loopback gateway admitted Host %q Origin %q", host, origin)
			}
		}
		if status, _ := lan.refusal(r); status == 0 {
			oh, ok := originHost()
			hostOK := rpc.LoopbackHost(h) || net.ParseIP(h) != nil || strings.EqualFold(h, "gpu.lan")
			originOK := ok && (oh == "" || rpc.LoopbackHost(oh) || strings.EqualFold(oh, "gpu.lan"))
			scheme, cred, _ := strings.Cut(auth, " ")
			tokenOK := strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(cred) == "tok"
			if !hostOK || !originOK || !tokenOK {
				t.Fatalf("wildcard gateway admitted Host %q Origin %q Authorization %q", host, origin, auth)
			}
		}
	})
}
