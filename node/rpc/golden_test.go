package rpc

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goldenAddr is the address the transcripts are served on.
var goldenAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4031}

var update = flag.Bool("update", false, "rewrite testdata/*.txt expectations from current behaviour")

// A golden file is a preamble of '#' comment lines, then cases:
//
//	=== case name
//	POST /
//	Header: value
//
//	request body (may span lines)
//	--- want
//	Status: 200
//	Invoked: 1
//
//	exact response body
//
// Invoked is how many test handlers ran while serving the request, which
// is how the 401 and 403 cases prove that no method was executed. Requests
// are served as if on 127.0.0.1:4031; a "Host:" line sets the Host.
type goldenCase struct {
	name, reqMethod, path string
	headers               [][2]string
	body                  string
	status, invoked       int
	want                  string
}

func parseGolden(t testing.TB, path string) (preamble []string, cases []*goldenCase) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cur *goldenCase
	var section []string
	flush := func() {
		if cur == nil {
			return
		}
		req, want, ok := cutLines(section, "--- want")
		if !ok || len(req) == 0 {
			t.Fatalf("%s: case %q: missing request or '--- want'", path, cur.name)
		}
		cur.reqMethod, cur.path, _ = strings.Cut(req[0], " ")
		hdrs, body, _ := cutLines(req[1:], "")
		for _, h := range hdrs {
			k, v, _ := strings.Cut(h, ": ")
			cur.headers = append(cur.headers, [2]string{k, v})
		}
		cur.body = strings.TrimRight(strings.Join(body, "\n"), "\n")
		meta, wbody, _ := cutLines(want, "")
		for _, m := range meta {
			k, v, _ := strings.Cut(m, ": ")
			n, _ := strconv.Atoi(v)
			switch k {
			case "Status":
				cur.status = n
			case "Invoked":
				cur.invoked = n
			}
		}
		cur.want = strings.TrimRight(strings.Join(wbody, "\n"), "\n")
		cases = append(cases, cur)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "=== "):
			flush()
			cur, section = &goldenCase{name: strings.TrimPrefix(line, "=== ")}, nil
		case cur == nil:
			preamble = append(preamble, line)
		default:
			section = append(section, line)
		}
	}
	flush()
	return preamble, cases
}

func cutLines(lines []string, sep string) (before, after []string, found bool) {
	for i, l := range lines {
		if l == sep {
			return lines[:i], lines[i+1:], true
		}
	}
	return lines, nil, false
}

func writeGolden(t *testing.T, path string, preamble []string, cases []*goldenCase) {
	var b strings.Builder
	for _, l := range preamble {
		b.WriteString(l + "\n")
	}
	for _, c := range cases {
		fmt.Fprintf(&b, "=== %s\n%s %s\n", c.name, c.reqMethod, c.path)
		for _, h := range c.headers {
			fmt.Fprintf(&b, "%s: %s\n", h[0], h[1])
		}
		fmt.Fprintf(&b, "\n%s\n--- want\nStatus: %d\nInvoked: %d\n\n%s\n\n", c.body, c.status, c.invoked, c.want)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGolden replays every testdata/*.txt transcript against a fresh test
// server and compares status, handler invocations and the exact body.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			preamble, cases := parseGolden(t, path)
			ts := newTestServer()
			h := ts.Handler()
			for _, c := range cases {
				req := httptest.NewRequest(c.reqMethod, c.path, strings.NewReader(c.body))
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, goldenAddr))
				req.Host = goldenAddr.String()
				for _, kv := range c.headers {
					if kv[0] == "Host" {
						req.Host = kv[1]
						continue
					}
					req.Header.Add(kv[0], kv[1])
				}
				before := ts.invoked.Load()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				status, invoked, body := rec.Code, int(ts.invoked.Load()-before), rec.Body.String()
				if *update {
					c.status, c.invoked, c.want = status, invoked, body
					continue
				}
				if status != c.status || invoked != c.invoked || body != c.want {
					t.Errorf("case %q:\n got Status %d Invoked %d\n%s\nwant Status %d Invoked %d\n%s",
						c.name, status, invoked, body, c.status, c.invoked, c.want)
				}
				if status != http.StatusNoContent && rec.Header().Get("Content-Type") != "application/json" {
					t.Errorf("case %q: Content-Type %q", c.name, rec.Header().Get("Content-Type"))
				}
			}
			if *update {
				writeGolden(t, path, preamble, cases)
			}
		})
	}
}
