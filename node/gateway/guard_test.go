package gateway

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// call sends method to url with Host (when not empty) and the headers in
// hdr, and returns the status, the answer's header and its body.
func call(t *testing.T, method, url, host string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"prompt":"a b","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// assertRefused checks a refusal's status and one-line plain-text body,
// and that nothing of it reached a replica or the figures (the autoscaler
// and the bill read those).
func assertRefused(t *testing.T, g *Gateway, b *backend, status int, hdr http.Header, body string, want int, says string) {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d (%q)", status, want, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
	if strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") || !strings.Contains(body, says) {
		t.Errorf("body %q: want one line that says %q", body, says)
	}
	if n := b.hits.Load(); n != 0 {
		t.Errorf("%d refused request(s) reached the replica", n)
	}
	if st := g.Stats(); st.Requests != 0 || st.Errors != 0 || st.Outstanding != 0 {
		t.Errorf("refused requests counted: %+v", st.Figures)
	}
}

func TestGatewayRefusesRebindingHost(t *testing.T) {
	b := newBackend(t, modelHandler())
	g, url := startGateway(t, Config{}, b.replica("a", 0))
	port := url[strings.LastIndex(url, ":")+1:]
	for _, host := range []string{"attacker.example", "attacker.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.evil.example", "10.0.0.7:" + port} {
		status, hdr, body := call(t, http.MethodPost, url+"/v1/completions", host)
		assertRefused(t, g, b, status, hdr, body, http.StatusForbidden, "Host")
	}
}

func TestGatewayRefusesForeignOrigin(t *testing.T) {
	b := newBackend(t, modelHandler())
	g, url := startGateway(t, Config{}, b.replica("a", 0))
	for _, origin := range []string{"http://evil.example", "https://evil.example:443", "null", "file://", "http://localhost.evil.example", "chrome-extension://abc", "*", "http://127.0.0.1:1/path"} {
		status, hdr, body := call(t, http.MethodPost, url+"/v1/completions", "", "Origin", origin)
		assertRefused(t, g, b, status, hdr, body, http.StatusForbidden, "Origin")
	}
}

func TestGatewayAdmitsLoopbackOrigin(t *testing.T) {
	b := newBackend(t, modelHandler())
	_, url := startGateway(t, Config{}, b.replica("a", 0))
	for _, origin := range []string{url, "http://localhost:3000", "https://[::1]", "HTTP://LOCALHOST"} {
		if status, _, body := call(t, http.MethodPost, url+"/v1/completions", "", "Origin", origin); status != http.StatusOK {
			t.Errorf("Origin %s: %d %q", origin, status, body)
		}
	}
}

func TestGatewayPlainLocalRequestNeedsNothing(t *testing.T) {
	b := newBackend(t, modelHandler())
	_, url := startGateway(t, Config{}, b.replica("a", 0))
	port := url[strings.LastIndex(url, ":")+1:]
	for _, host := range []string{"", "localhost:" + port, "[::1]:" + port, "127.0.0.2"} {
		if status, _, body := call(t, http.MethodPost, url+"/v1/completions", host); status != http.StatusOK {
			t.Errorf("Host %q: %d %q", host, status, body)
		}
	}
}

// lanListener is a loopback listener that says it is on addr, so that a
// test can serve "beyond loopback" without opening a port to the network.
type lanListener struct {
	net.Listener
	addr net.Addr
}

func (l lanListener) Addr() net.Addr { return l.addr }

func startOn(t *testing.T, cfg Config, ip string, rs ...Replica) (*Gateway, string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	g := New(cfg)
	g.SetReplicas(rs)
	t.Cleanup(func() { _ = g.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	err = g.Start(lanListener{ln, &net.TCPAddr{IP: net.ParseIP(ip), Port: port}})
	return g, "http://" + ln.Addr().String(), err
}

func TestGatewayBeyondLoopbackNeedsToken(t *testing.T) {
	for _, ip := range []string{"0.0.0.0", "::", "192.0.2.7"} {
		if _, _, err := startOn(t, Config{}, ip); err == nil || !strings.Contains(err.Error(), "token") {
			t.Errorf("%s without a token: %v, want a refusal that names the token", ip, err)
		}
	}
	if _, err := New(Config{}).Listen("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("Listen 0.0.0.0 without a token: %v", err)
	}

	var sawAuth atomic.Bool
	b := newBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth.Store(r.Header.Get("Authorization") != "")
		modelHandler().ServeHTTP(w, r)
	}))
	g, url, err := startOn(t, Config{Token: "s3cret-token"}, "192.0.2.7", b.replica("a", 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-token-and-more", "Basic czNjcmV0LXRva2Vu", "s3cret-token", "Bearer "} {
		status, hdr, body := call(t, http.MethodPost, url+"/v1/completions", "", "Authorization", auth)
		assertRefused(t, g, b, status, hdr, body, http.StatusUnauthorized, "token")
		if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%q: WWW-Authenticate %q", auth, hdr.Get("WWW-Authenticate"))
		}
	}
	// Host and Origin are checked first, token or not.
	status, hdr, body := call(t, http.MethodPost, url+"/v1/completions", "evil.example", "Authorization", "Bearer s3cret-token")
	assertRefused(t, g, b, status, hdr, body, http.StatusForbidden, "Host")

	for _, host := range []string{"", "192.0.2.7:8080", "localhost"} {
		if status, _, body := call(t, http.MethodPost, url+"/v1/completions", host, "Authorization", "bearer s3cret-token"); status != http.StatusOK {
			t.Errorf("right token, Host %q: %d %q", host, status, body)
		}
	}
	if sawAuth.Load() {
		t.Error("the gateway's token was passed on to the replica")
	}
}

func TestGatewayWildcardAdmitsIPHostsNotForeignPages(t *testing.T) {
	b := newBackend(t, modelHandler())
	g, url, err := startOn(t, Config{Token: "t0ken", Hosts: []string{"GPU-box.lan"}}, "0.0.0.0", b.replica("a", 0))
	if err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer t0ken"}
	// A page served by another machine has an IP-literal origin too.
	status, hdr, body := call(t, http.MethodGet, url+"/v1/models", "192.168.1.5", append(auth, "Origin", "http://192.168.1.9:3000")...)
	assertRefused(t, g, b, status, hdr, body, http.StatusForbidden, "Origin")
	status, hdr, body = call(t, http.MethodGet, url+"/v1/models", "gpu-box.evil.example", auth...)
	assertRefused(t, g, b, status, hdr, body, http.StatusForbidden, "Host")
	for _, host := range []string{"192.168.1.5:9000", "[fe80::1]:9000", "gpu-box.lan:9000"} {
		if status, _, body := call(t, http.MethodGet, url+"/v1/models", host, auth...); status != http.StatusOK {
			t.Errorf("Host %s: %d %q", host, status, body)
		}
	}
}
