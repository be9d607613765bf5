package rpc

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Host and Origin checks. The bearer token is what keeps other local
// processes out; these two keep out web pages, which can make a browser
// send requests to 127.0.0.1 but cannot choose its Host and Origin headers:
//
//   - DNS rebinding: a page on evil.example re-resolves its own name to
//     127.0.0.1 and talks to the node as "same origin". The request's Host
//     is then evil.example, never a loopback name, so it is refused.
//   - Cross-origin requests: a page on any other origin (including another
//     local web app on a different port) carries that Origin. Only this
//     server's own loopback origins, and the explicitly allowed ones, pass.
//
// Non-browser clients (the CLI, curl, scripts) send a loopback Host and
// usually no Origin at all, so neither check gets in their way. Both run
// before the token is looked at, so a page learns nothing but a 403.

// checkHost refuses a Host that is not a loopback name or address, unless
// remote access is allowed. Only the name is checked, not the port: DNS
// rebinding is defeated by the name, and a port check would break
// `ssh -L 9000:127.0.0.1:4031` tunnels without stopping any attack.
func (s *Server) checkHost(r *http.Request) *Error {
	if s.allowRemote || LoopbackHost(HostName(r.Host)) {
		return nil
	}
	return forbidden(fmt.Sprintf("Host %s is not a loopback name; this API answers only localhost, 127.0.0.1 and [::1] unless rpc.allow_remote is set", quoteShort(r.Host)))
}

// checkOrigin admits a request without an Origin header, or whose every
// Origin is allowed.
func (s *Server) checkOrigin(r *http.Request) *Error {
	for _, o := range r.Header.Values("Origin") {
		if o == "" || s.originAllowed(r, o) {
			continue // an empty Origin is not something a browser sends
		}
		return forbidden(fmt.Sprintf("Origin %s may not use this API; allowed are this server's loopback origins and rpc.allowed_origins", quoteShort(o)))
	}
	return nil
}

func (s *Server) originAllowed(r *http.Request, origin string) bool {
	if s.anyOrigin {
		return true
	}
	c, err := CanonicalOrigin(origin)
	if err != nil {
		return false
	}
	if s.origins[c] {
		return true
	}
	// A loopback origin must also be on this server's port: a page served
	// by another local web app (http://localhost:3000) is a foreign origin.
	// The port may also be the one in a loopback Host: a client reaching us
	// through a tunnel (localhost:9000) that sends its own origin, as some
	// WebSocket libraries do. A browser page could carry that origin only if
	// the tunnel, that is this server, had served it, and it serves no pages.
	u, _ := url.Parse(c)
	if u.Scheme != "http" || !LoopbackHost(u.Hostname()) {
		return false
	}
	port := portOr80(u.Port())
	if port == localPort(r) {
		return true
	}
	hostPort := "80"
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		hostPort = p
	}
	return hostPort == port && LoopbackHost(HostName(r.Host))
}

func portOr80(p string) string {
	if p == "" {
		return "80"
	}
	return p
}

// CanonicalOrigin checks that s is a web origin (scheme://host[:port], no
// path, query or user info) and returns it in the form browsers send:
// lower case, without a trailing slash or the scheme's default port. "*"
// is returned as is.
func CanonicalOrigin(s string) (string, error) {
	if s == "*" {
		return s, nil
	}
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	switch {
	case err != nil:
		return "", fmt.Errorf("origin %q: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("origin %q: want http://host[:port] or https://host[:port]", s)
	case u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || u.Hostname() == "":
		return "", fmt.Errorf("origin %q: want only scheme://host[:port], without path, query or user", s)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// HostName strips the port (and IPv6 brackets) from a Host header.
func HostName(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// LoopbackHost: "localhost" or an address in 127.0.0.0/8 or ::1. Other
// *.localhost names are refused: whether they resolve to loopback is up to
// the resolver.
func LoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// localPort is the port the connection arrived on, "" when unknown (the
// handler is not behind a net/http server), which no origin port matches.
func localPort(r *http.Request) string {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	_, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return ""
	}
	return p
}

func forbidden(msg string) *Error {
	return &Error{Code: CodeForbidden, Message: "forbidden: " + msg}
}

// quoteShort quotes a client-supplied header for an error message, cut to
// a length that cannot bloat the reply.
func quoteShort(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return fmt.Sprintf("%q", s)
}
