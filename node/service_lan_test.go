package node

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/services"
)

// lanGet is one GET of url's path with the bearer token (none when ""),
// Host header host (url's when ""): its status.
func lanGet(t *testing.T, url, host, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode
}

// otherAddr is an IPv4 address of this machine beyond loopback, "" if it
// has none.
func otherAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// A gateway asked to listen on every interface (service_up's listen, as
// `service up --listen 0.0.0.0:0` sends it): the node makes the service's
// token in <repo>/service-tokens, mode 0600; a call without it or with
// another is refused with 401 and never reaches the replica, one with it
// is served, via 127.0.0.1 and via another address of this machine (or,
// without one, an IP-literal Host), and by the LAN name the spec's
// gateway.hosts allows, which is refused otherwise. After the renter's
// restart the gateway listens again on the same address and port with the
// same token; a token file others can read keeps it down, one deleted is
// made anew; `service down` deletes the token.
func TestServiceGatewayBeyondLoopbackNeedsItsToken(t *testing.T) {
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := serviceSeller(t, ctx)
	rn := renterOf(t, ctx, prov)
	spec := strings.Replace(modelService("lan", 1), "  replicas:", "  gateway: {hosts: [gpubox.lan]}\n  replicas:", 1)
	up, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: spec, Listen: "0.0.0.0:0"})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(rn.repo.Dir, "service-tokens", "lan.token") // a test's temporary path: nothing in it a shell would need quoted
	port := strconv.Itoa(up.Port)
	if up.Token != file || up.Listen != "0.0.0.0:"+port || up.URL != "http://127.0.0.1:"+port ||
		up.Curl != `curl -H "Authorization: Bearer $(cat `+file+`)" http://127.0.0.1:`+port+"/health" {
		t.Fatalf("service_up: token file %q, listen %q, url %q, curl %q", up.Token, up.Listen, up.URL, up.Curl)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v (mode %v)", err, st.Mode().Perm())
	}
	raw, _ := os.ReadFile(file)
	token := strings.TrimSpace(string(raw))
	v := waitService(t, rn, "lan", 60*time.Second, "one ready replica", func(v *services.ServiceView) bool { return readyOn(v, 1) })

	other := otherAddr()
	served := 0 // calls answered 200
	check := func(when string) {
		t.Helper()
		health := up.URL + "/health"
		for _, c := range []struct {
			what, url, host, token string
			want                   int
		}{
			{"no token", health, "", "", http.StatusUnauthorized},
			{"another token", health, "", strings.Repeat("0", 64), http.StatusUnauthorized},
			{"the token", health, "", token, http.StatusOK},
			{"the token, an IP-literal Host", health, "192.0.2.10:" + port, token, http.StatusOK},
			{"the token, the LAN name in gateway.hosts", health, "gpubox.lan:" + port, token, http.StatusOK},
			{"the token, another name", health, "evil.example:" + port, token, http.StatusForbidden},
		} {
			if got := lanGet(t, c.url, c.host, c.token); got != c.want {
				t.Fatalf("%s: %s: status %d, want %d", when, c.what, got, c.want)
			}
			if c.want == http.StatusOK {
				served++
			}
		}
		if other == "" {
			t.Logf("no address beyond loopback here: called through 127.0.0.1 with an IP-literal Host instead")
			return
		}
		url := "http://" + net.JoinHostPort(other, port) + "/health"
		if got := lanGet(t, url, "", ""); got != http.StatusUnauthorized {
			t.Fatalf("%s: via %s without the token: status %d, want 401", when, other, got)
		}
		if got := lanGet(t, url, "", token); got != http.StatusOK {
			t.Fatalf("%s: via %s with the token: status %d, want 200", when, other, got)
		}
		served++
	}
	check("after service up")
	before := v.Stats.Requests
	if v = waitService(t, rn, "lan", time.Second, "figures", func(*services.ServiceView) bool { return true }); v.Stats.Requests-before != uint64(served) {
		t.Fatalf("%d requests counted for %d served: refused calls counted", v.Stats.Requests-before, served)
	}

	rn = restartRenter(t, ctx, rn, prov)
	v = waitService(t, rn, "lan", 60*time.Second, "the gateway back with a ready replica", func(v *services.ServiceView) bool {
		return v.Gateway == "up" && readyOn(v, 1)
	})
	if v.Port != up.Port || v.Listen != up.Listen || v.Token != file {
		t.Fatalf("after the restart: port %d, listen %q, token file %q; want %d, %q, %q", v.Port, v.Listen, v.Token, up.Port, up.Listen, file)
	}
	if again, _ := os.ReadFile(file); strings.TrimSpace(string(again)) != token {
		t.Fatal("the restart changed the token")
	}
	check("after the renter's restart")

	// A token file others can read is refused, as rpc.token is: the
	// gateway stays down and says why.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	rn = restartRenter(t, ctx, rn, prov)
	if v = waitService(t, rn, "lan", time.Second, "the view", func(*services.ServiceView) bool { return true }); v.Gateway != "down" || !strings.Contains(v.Error, "chmod 600") {
		t.Fatalf("with a token file others can read: gateway %s, %q", v.Gateway, v.Error)
	}
	// One deleted is made anew: the old token is refused, the new served.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	rn = restartRenter(t, ctx, rn, prov)
	waitService(t, rn, "lan", 60*time.Second, "the gateway back with a ready replica", func(v *services.ServiceView) bool {
		return v.Gateway == "up" && readyOn(v, 1)
	})
	old := token
	raw, _ = os.ReadFile(file)
	if token = strings.TrimSpace(string(raw)); len(token) != 64 || token == old {
		t.Fatalf("a new token %q after the file was deleted", token)
	}
	if got := lanGet(t, up.URL+"/health", "", old); got != http.StatusUnauthorized {
		t.Fatalf("the old token after a new one was made: status %d, want 401", got)
	}
	check("with a token made anew")

	if _, err := serviceAPIOf(rn).Down(ctx, services.ServiceNameParams{Name: "lan"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the token file outlived service down: %v", err)
	}
}
