package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// Who may call the gateway. A call spends the renter's credits and pushes
// the autoscaler, so the gateway, like the RPC (node/rpc/guard.go), keeps
// out web pages, which can make a browser send requests to 127.0.0.1 but
// cannot choose their Host and Origin headers:
//
//   - DNS rebinding: a page on evil.example re-resolves its name to
//     127.0.0.1 and reads the answers as "same origin". Its Host is then
//     evil.example, which is refused: only loopback names, the address
//     the gateway listens on and Config.Hosts are answered.
//   - Cross-origin requests: a page elsewhere carries its Origin, which
//     must be http(s) on one of those hosts. Unlike the RPC's, the port
//     is not checked: a local chat UI on another port is a local program
//     the user runs, which could call the gateway without a browser.
//
// Scripts and SDKs send a loopback Host and no Origin, so the default,
// loopback with no token, stays `curl http://127.0.0.1:PORT/...`. Beyond
// loopback other machines can reach the port, so a bearer token is
// required there (Listen and Start refuse to serve without one). A
// refused request is answered before anything is counted or sent on: it
// never reaches a replica, costs nothing and does not move the autoscaler.

// access is who may call: fixed when the gateway starts serving.
type access struct {
	hosts   map[string]bool // hostKey form, besides loopback names
	anyIP   bool            // listening on a wildcard address: any IP-literal Host
	token   bool            // a bearer token is required
	authSum [32]byte        // sha256 of the token
}

func newAccess(cfg Config, ln net.Addr) *access {
	a := &access{hosts: map[string]bool{}, token: cfg.Token != ""}
	for _, h := range cfg.Hosts {
		a.hosts[hostKey(h)] = true
	}
	if ta, ok := ln.(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
		if ta.IP == nil || ta.IP.IsUnspecified() {
			// A wildcard address is reached under any of the machine's
			// addresses. An IP literal is never a rebinding attack: the
			// page's origin would then be this gateway itself.
			a.anyIP = true
		} else {
			a.hosts[hostKey(ta.IP.String())] = true
		}
	}
	a.authSum = sha256.Sum256([]byte(cfg.Token))
	return a
}

// beyondLoopback reports whether an address is reachable from other
// machines: a TCP address that is not loopback (a wildcard one included).
func beyondLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && !ta.IP.IsLoopback()
}

// hostKey is the form a host is compared in: an IP in its canonical text,
// a name in lower case.
func hostKey(h string) string {
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return strings.ToLower(h)
}

// hostAllowed reports whether a Host header, or an origin's host[:port],
// names this gateway. The port is not checked (see above; a port check
// would also break `ssh -L` tunnels without stopping any attack).
func (a *access) hostAllowed(hostport string, ipLiterals bool) bool {
	h := rpc.HostName(hostport)
	if rpc.LoopbackHost(h) || a.hosts[hostKey(h)] {
		return true
	}
	return ipLiterals && a.anyIP && net.ParseIP(h) != nil
}

// originAllowed: an http(s) origin on a host the gateway answers to. An
// IP literal on a wildcard gateway is not enough here: a page served by
// another machine on the LAN has one.
func (a *access) originAllowed(origin string) bool {
	c, err := rpc.CanonicalOrigin(origin)
	if err != nil || c == "*" {
		return false
	}
	u, err := url.Parse(c)
	return err == nil && a.hostAllowed(u.Host, false)
}

// authorized compares digests so that the comparison is constant-time
// whatever the presented token's length.
func (a *access) authorized(header string) bool {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		cred = ""
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	return subtle.ConstantTimeCompare(got[:], a.authSum[:]) == 1
}

// refusal says why r may not use the gateway: the status (403 for Host
// or Origin, 401 for the token) and a one-line message that says what to
// do; 0 when r may. Client-supplied headers are quoted and cut to 100
// characters (%.100q), so a message cannot bloat the reply.
func (a *access) refusal(r *http.Request) (int, string) {
	if !a.hostAllowed(r.Host, true) {
		return http.StatusForbidden, fmt.Sprintf("Host %.100q is not this service gateway's: call it as 127.0.0.1, localhost or [::1] (or the address it listens on)", r.Host)
	}
	for _, o := range r.Header.Values("Origin") {
		if o != "" && !a.originAllowed(o) {
			return http.StatusForbidden, fmt.Sprintf("Origin %.100q may not call this service gateway: only pages on a loopback origin (or the address it listens on) may; call it from a local program instead", o)
		}
	}
	if a.token && !a.authorized(r.Header.Get("Authorization")) {
		what := "wrong"
		if r.Header.Get("Authorization") == "" {
			what = "missing"
		}
		return http.StatusUnauthorized, fmt.Sprintf("bearer token %s: this service gateway listens beyond loopback; send \"Authorization: Bearer <token>\" with the gateway's token", what)
	}
	return 0, ""
}

// refuse answers a refused request in plain text.
func refuse(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gleaner service gateway"`)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, "service gateway: "+msg)
}
