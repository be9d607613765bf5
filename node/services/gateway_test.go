package services

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

const gatewaySpec = `name: lan
kind: service
image: gleaner-modelserver:dev
service:
  port: 8000
  readiness: {path: /health}
  gateway: {listen: "0.0.0.0:8080", hosts: [gpubox.lan]}
resources: {gpus: 1}
tier: bronze
max_price: 1.00
duration: {max: 1h}
`

// Where service up's gateway listens: --listen over the spec's
// gateway.listen over 127.0.0.1, --port for the port.
func TestGatewayAddrPrecedence(t *testing.T) {
	withGW, err := auction.ParseJobSpec([]byte(gatewaySpec))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := auction.ParseJobSpec([]byte(strings.Replace(gatewaySpec, "  gateway: {listen: \"0.0.0.0:8080\", hosts: [gpubox.lan]}\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec   *auction.JobSpec
		listen string
		port   int
		host   string
		want   int
	}{
		{plain, "", 0, "127.0.0.1", 0},
		{plain, "", 9000, "127.0.0.1", 9000},
		{plain, "[::]:7000", 0, "::", 7000},
		{withGW, "", 0, "0.0.0.0", 8080},
		{withGW, "", 9000, "0.0.0.0", 9000},
		{withGW, "localhost:0", 0, "127.0.0.1", 0},
	} {
		host, port, err := gatewayAddr(c.spec, c.listen, c.port)
		if err != nil || host != c.host || port != c.want {
			t.Errorf("spec gateway %q, --listen %q, --port %d: %s %d (%v); want %s %d",
				c.spec.Service.Gateway.Listen, c.listen, c.port, host, port, err, c.host, c.want)
		}
	}
}

// service_up's listen parameter is checked before anything is bought.
func TestServiceUpParamsListen(t *testing.T) {
	for _, c := range []struct {
		p    ServiceUpParams
		want string // "" valid
	}{
		{ServiceUpParams{Spec: "x", Listen: "0.0.0.0:8080"}, ""},
		{ServiceUpParams{Spec: "x", Listen: "[::]:0"}, ""},
		{ServiceUpParams{Spec: "x", Listen: "0.0.0.0"}, "listen: \"0.0.0.0\": want host:port"},
		{ServiceUpParams{Spec: "x", Listen: ":8080"}, "listen: \":8080\": name the host"},
		{ServiceUpParams{Spec: "x", Listen: "gpubox.lan:80"}, "IP address of this machine"},
		{ServiceUpParams{Spec: "x", Listen: "0.0.0.0:8080", Port: 9000}, "port: give listen (host:port) or port, not both"},
	} {
		err := c.p.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v; want %q", c.p, err, c.want)
		}
	}
}

// No provider learns where the renter's gateway listens: a replica's
// spec carries no gateway section, and hashes as the spec without one.
func TestReplicaSpecLeavesTheGatewayOut(t *testing.T) {
	withGW, err := auction.ParseJobSpec([]byte(gatewaySpec))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := auction.ParseJobSpec([]byte(strings.Replace(gatewaySpec, "  gateway: {listen: \"0.0.0.0:8080\", hosts: [gpubox.lan]}\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := replicaSpec(withGW, 0, plain.Start)
	if err != nil {
		t.Fatal(err)
	}
	b, err := replicaSpec(plain, 0, plain.Start)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) || bytes.Contains(a, []byte("gateway")) || bytes.Contains(a, []byte("gpubox")) {
		t.Fatalf("replica spec with a gateway:\n%s\nwithout:\n%s", a, b)
	}
	if withGW.Service.Gateway.Listen == "" {
		t.Fatal("replicaSpec changed the service's own spec")
	}
}

func TestGatewayCallURLAndCurl(t *testing.T) {
	for _, c := range []struct {
		host string
		want string
	}{
		{"127.0.0.1", "http://127.0.0.1:8080"},
		{"0.0.0.0", "http://127.0.0.1:8080"},
		{"::", "http://[::1]:8080"},
		{"192.168.1.20", "http://192.168.1.20:8080"},
	} {
		if got := callURL(c.host, 8080); got != c.want {
			t.Errorf("%s: %s, want %s", c.host, got, c.want)
		}
		if c.host != "0.0.0.0" && c.host != "::" && lanURLs(c.host, 8080) != nil {
			t.Errorf("%s: other URLs %v for an address that is its own", c.host, lanURLs(c.host, 8080))
		}
	}
	if got, want := curlLine("http://127.0.0.1:8080", "/health", ""), "curl http://127.0.0.1:8080/health"; got != want {
		t.Errorf("%s, want %s", got, want)
	}
	got := curlLine("http://[::1]:8080", "/ready?deep=1", "/home/o'neil/.gleaner/service-tokens/lan.token")
	want := `curl -H "Authorization: Bearer $(cat '/home/o'\''neil/.gleaner/service-tokens/lan.token')" 'http://[::1]:8080/ready?deep=1'`
	if got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
}
