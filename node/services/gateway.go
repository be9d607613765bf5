package services

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

// Where a service's gateway listens, and the token that guards it beyond
// loopback (docs/SERVICES.md, "Who may call the gateway"). The default is
// 127.0.0.1 with no token, so local scripts call it as they are. On an
// address other machines can reach (one of this machine's, or 0.0.0.0 /
// [::] for every interface) every call needs the service's bearer token:
// made at `service up` from crypto/rand, kept in
// <repo>/service-tokens/<name>.token (mode 0600, beside rpc.token) and
// read again at each restart, deleted at `service down`.

const loopbackHost = "127.0.0.1"

// gatewayAddr is where service up's gateway listens: listen (--listen)
// over the spec's gateway.listen over 127.0.0.1:0, and port (--port),
// when not 0, for the port. ServiceUpParams.Validate has refused both.
func gatewayAddr(spec *auction.JobSpec, listen string, port int) (host string, p int, err error) {
	at := listen
	if at == "" {
		at = spec.Service.Gateway.Listen
	}
	if at == "" {
		at = net.JoinHostPort(loopbackHost, "0")
	}
	norm, err := auction.ParseGatewayListen(at)
	if err != nil {
		return "", 0, fmt.Errorf("listen: %w", err)
	}
	host, ps, _ := net.SplitHostPort(norm)
	p, _ = strconv.Atoi(ps)
	if port != 0 {
		p = port
	}
	return host, p, nil
}

// listenHost is the host rec's gateway listens on: 127.0.0.1 for a record
// kept before the host was.
func listenHost(rec *ServiceRecord) string {
	if rec.Host == "" {
		return loopbackHost
	}
	return rec.Host
}

// beyondLoopback reports a host other machines may reach; one that does
// not parse counts as reachable.
func beyondLoopback(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsLoopback()
}

// gatewayToken is the token a gateway on host needs ("" on loopback) and
// its file. fresh (service up) makes a new one, or on loopback deletes a
// stale one; otherwise (a restart) the kept one is read, and made anew
// only when its file is gone (a token file others can read is refused,
// as rpc.token is).
func (s *Manager) gatewayToken(name, host string, fresh bool) (token, file string, err error) {
	r := s.repo
	if !beyondLoopback(host) {
		if fresh {
			err = r.RemoveServiceToken(name)
		}
		return "", "", err
	}
	file = r.ServiceTokenPath(name)
	if !fresh {
		token, err = r.ServiceToken(name)
		if !errors.Is(err, os.ErrNotExist) {
			return token, file, err
		}
		s.log.Warn("service token file gone: a new token is made; callers must read it again", "service", name, "file", file)
	}
	token, err = r.NewServiceToken(name)
	return token, file, err
}

// forgetToken deletes a service's token file, if it has one.
func (s *Manager) forgetToken(name string) {
	if err := s.repo.RemoveServiceToken(name); err != nil {
		s.log.Warn("service token not deleted", "service", name, "err", err)
	}
}

// callURL is the URL to call a gateway listening on host and port from
// this machine: a wildcard address is called on loopback. It goes by the
// host asked for, not the listener's address: Go listens on 0.0.0.0 with
// a dual-stack socket, whose address reads [::].
func callURL(host string, port int) string {
	switch host {
	case "0.0.0.0":
		host = loopbackHost
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// lanURLs are a wildcard gateway's URLs for other machines: one per
// address of this machine's interfaces beyond loopback and link-local
// (IPv4 only for 0.0.0.0), at most 8; none for any other address, whose
// URL is already the one to call.
func lanURLs(host string, port int) []string {
	if host != "0.0.0.0" && host != "::" {
		return nil
	}
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range ifAddrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() || host == "0.0.0.0" && n.IP.To4() == nil {
			continue
		}
		out = append(out, "http://"+net.JoinHostPort(n.IP.String(), strconv.Itoa(port)))
		if len(out) == 8 {
			break
		}
	}
	return out
}

// curlLine is a command that calls path through the gateway at url, with
// the token from file when there is one.
func curlLine(url, path, file string) string {
	if file == "" {
		return "curl " + shellWord(url+path)
	}
	return `curl -H "Authorization: Bearer $(cat ` + shellWord(file) + `)" ` + shellWord(url+path)
}

// shellWord quotes s for a POSIX shell unless it needs none.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:%+=,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
