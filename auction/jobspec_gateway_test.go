package auction

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The gateway section: where the renter's node serves a service, read as
// written and kept through a round trip.
func TestParseServiceGateway(t *testing.T) {
	s, err := ParseJobSpec(serviceWith(11, `  gateway: {listen: "0.0.0.0:8080", hosts: [GPUBox.lan., 192.168.1.20]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := ServiceGateway{Listen: "0.0.0.0:8080", Hosts: []string{"gpubox.lan", "192.168.1.20"}}
	if !reflect.DeepEqual(s.Service.Gateway, want) {
		t.Fatalf("gateway %#v, want %#v", s.Service.Gateway, want)
	}
	assertRoundTrip(t, s)
}

func TestParseGatewayListen(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:8080":          "0.0.0.0:8080",
		"[::]:0":                "[::]:0",
		"localhost:9000":        "127.0.0.1:9000",
		"LOCALHOST:9000":        "127.0.0.1:9000",
		"[::ffff:10.0.0.7]:443": "10.0.0.7:443",
		"192.168.1.20:65535":    "192.168.1.20:65535",
	} {
		if got, err := ParseGatewayListen(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"0.0.0.0":           "want host:port",
		"8080":              "want host:port",
		":8080":             "name the host",
		"0.0.0.0:65536":     "0..65535",
		"0.0.0.0:-1":        "0..65535",
		"0.0.0.0:http":      "0..65535",
		"gpubox.lan:8080":   "service.gateway.hosts",
		"[ff02::1]:8080":    "multicast",
		"[fe80::1%eth0]:80": "zone",
		"0.0.0.0:8080/path": "0..65535",
	} {
		if got, err := ParseGatewayListen(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %q, %v; want an error saying %q", in, got, err, msg)
		}
	}
}

// A bad gateway is refused at its line, as every field of a spec is.
func TestParseServiceGatewayErrors(t *testing.T) {
	for _, c := range []struct {
		name, repl, field, msg string
	}{
		{"no port", `  gateway: {listen: "0.0.0.0"}`, "service.gateway.listen", "want host:port"},
		{"port too big", `  gateway: {listen: "0.0.0.0:99999"}`, "service.gateway.listen", "0..65535"},
		{"no host", `  gateway: {listen: ":8080"}`, "service.gateway.listen", "name the host"},
		{"a name", `  gateway: {listen: "gpubox.lan:8080"}`, "service.gateway.listen", "IP address of this machine"},
		{"not a string", `  gateway: {listen: [0.0.0.0, 8080]}`, "service.gateway.listen", "single value"},
		{"host with a port", `  gateway: {hosts: ["gpubox.lan:8080"]}`, "service.gateway.hosts[0]", "no port"},
		{"host with a space", `  gateway: {hosts: ["gpu box"]}`, "service.gateway.hosts[0]", "host name"},
		{"host repeated", `  gateway: {hosts: [a.lan, A.lan]}`, "service.gateway.hosts[1]", "repeated"},
		{"too many hosts", `  gateway: {hosts: [a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q]}`, "service.gateway.hosts", "limit 16"},
		{"a token", `  gateway: {token: secret}`, "service.gateway.token", "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseJobSpec(serviceWith(11, c.repl))
			var se *SpecError
			if !errors.As(err, &se) || !errors.Is(err, ErrBadJobSpec) {
				t.Fatalf("got %v, want a *SpecError", err)
			}
			if se.Line != 11 || se.Field != c.field || !strings.Contains(se.Msg, c.msg) {
				t.Fatalf("got %q, want line 11 field %s message containing %q", err, c.field, c.msg)
			}
		})
	}
}
