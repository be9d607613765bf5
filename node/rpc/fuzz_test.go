package rpc

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
)

// FuzzDecodeRequest: the decoder never panics, and it yields either one
// whole-message error with a spec code, or calls that are each valid or
// carry -32600, and every reply it leads to is valid JSON.
func FuzzDecodeRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, path := range files {
		_, cases := parseGolden(f, path)
		for _, c := range cases {
			f.Add([]byte(c.body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reqs, batch, err := decodeRequest(body, 8)
		if err != nil {
			if reqs != nil || (err.Code != CodeParse && err.Code != CodeInvalidRequest) {
				t.Fatalf("whole-message error %v with %d calls", err, len(reqs))
			}
			if !json.Valid(appendResponse(nil, nil, nil, err)) {
				t.Fatal("invalid error reply")
			}
			return
		}
		if len(reqs) == 0 || len(reqs) > 8 || (!batch && len(reqs) != 1) {
			t.Fatalf("%d calls, batch %v", len(reqs), batch)
		}
		for _, r := range reqs {
			if r.id != nil && !validID(r.id) {
				t.Fatalf("accepted id %s", r.id)
			}
			if r.err != nil {
				if r.err.Code != CodeInvalidRequest {
					t.Fatalf("per-call code %d", r.err.Code)
				}
			} else if r.params != nil && r.params[0] != '{' && r.params[0] != '[' {
				t.Fatalf("accepted params %s", r.params)
			}
			if !json.Valid(appendResponse(nil, r.id, []byte("true"), r.err)) {
				t.Fatalf("invalid reply for id %s", r.id)
			}
		}
	})
}

// FuzzHostOrigin: the Host and Origin checks never panic on any header
// values; CanonicalOrigin is idempotent and yields only http(s)
// origins; and with no origins allowed, an Origin gets in only if it is
// http on a loopback host and this server's port or the loopback Host's
// port, and a Host only if it is a loopback name.
func FuzzHostOrigin(f *testing.F) {
	for _, seed := range [][2]string{
		{"http://127.0.0.1:4031", "127.0.0.1:4031"},
		{"http://localhost:9000", "localhost:9000"},
		{"http://[::1]:4031", "[::1]:4031"},
		{"https://evil.example", "evil.example"},
		{"null", "127.0.0.1"},
		{"HTTP://LOCALHOST:4031/", "LOCALHOST"},
		{"http://127.0.0.1:04031", "[::1]"},
		{"http://[::ffff:127.0.0.1]:4031", "127.0.0.1.nip.io:4031"},
		{"", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	s := NewServer(testToken)
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, goldenAddr)
	f.Fuzz(func(t *testing.T, origin, host string) {
		if c, err := CanonicalOrigin(origin); err == nil && c != "*" {
			u, perr := url.Parse(c)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.User != nil {
				t.Fatalf("CanonicalOrigin(%q) = %q", origin, c)
			}
			if again, err := CanonicalOrigin(c); err != nil || again != c {
				t.Fatalf("CanonicalOrigin not idempotent: %q -> %q -> %q, %v", origin, c, again, err)
			}
		}
		r := (&http.Request{Host: host, Header: http.Header{"Origin": {origin}}}).WithContext(ctx)
		if s.checkHost(r) == nil && !LoopbackHost(HostName(host)) {
			t.Fatalf("Host %q admitted", host)
		}
		if s.checkOrigin(r) != nil || origin == "" {
			return
		}
		c, err := CanonicalOrigin(origin)
		if err != nil {
			t.Fatalf("Origin %q admitted without being an origin", origin)
		}
		u, _ := url.Parse(c)
		_, hostPort, herr := net.SplitHostPort(host)
		if herr != nil {
			hostPort = "80"
		}
		port := portOr80(u.Port())
		if u.Scheme != "http" || !LoopbackHost(u.Hostname()) ||
			(port != "4031" && !(port == hostPort && LoopbackHost(HostName(host)))) {
			t.Fatalf("Origin %q admitted with Host %q", origin, host)
		}
	})
}
