package rpc

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// postWith sends test_count to hs with the token, the given Host (if not
// "") and Origin headers, and returns the status and the decoded reply.
func postWith(t *testing.T, hs *httptest.Server, host string, origins ...string) (int, wsMsg) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"test_count"}`))
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	for _, o := range origins {
		req.Header.Add("Origin", o)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m wsMsg
	if err := decodeJSON(resp.Body, &m); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, m
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// TestHostAndOriginOverTCP runs the checks behind a real listener, where
// the server's port comes from the connection (the golden transcripts fake
// it), and shows that the token does not get a foreign Host or Origin in.
func TestHostAndOriginOverTCP(t *testing.T) {
	ts, hs := startWS(t)
	own := hs.URL // http://127.0.0.1:<port>
	port := own[strings.LastIndex(own, ":")+1:]
	for _, tc := range []struct {
		name   string
		host   string
		origin []string
		status int
	}{
		{"no Host override, no Origin", "", nil, 200},
		{"localhost on our port", "localhost:" + port, nil, 200},
		{"own origin", "", []string{own}, 200},
		{"own origin as localhost", "", []string{"http://localhost:" + port}, 200},
		{"rebinding name", "evil.example:" + port, nil, 403},
		{"rebinding name with its own origin", "evil.example:" + port, []string{"http://evil.example:" + port}, 403},
		{"loopback origin on another port", "", []string{"http://127.0.0.1:1"}, 403},
		{"foreign origin", "", []string{"https://evil.example"}, 403},
	} {
		before := ts.invoked.Load()
		status, m := postWith(t, hs, tc.host, tc.origin...)
		ran := ts.invoked.Load() - before
		if status != tc.status {
			t.Errorf("%s: status %d, want %d (%+v)", tc.name, status, tc.status, m.Error)
		}
		if tc.status == 403 && (m.Error == nil || m.Error.Code != CodeForbidden || ran != 0) {
			t.Errorf("%s: error %+v, %d handlers ran; want -32006 and none", tc.name, m.Error, ran)
		}
	}
}

// TestAllowRemoteSkipsOnlyTheHostCheck: a node meant to be reached under
// other names admits them, but a foreign Origin stays out.
func TestAllowRemoteSkipsOnlyTheHostCheck(t *testing.T) {
	_, hs := startWS(t, AllowRemote(true))
	if status, m := postWith(t, hs, "node.lan:4031"); status != 200 {
		t.Errorf("remote Host with AllowRemote: %d %+v", status, m.Error)
	}
	if status, _ := postWith(t, hs, "node.lan:4031", "http://node.lan:4031"); status != 403 {
		t.Errorf("rebinding page's own origin with AllowRemote: %d, want 403", status)
	}
	_, strict := startWS(t)
	if status, _ := postWith(t, strict, "node.lan:4031"); status != 403 {
		t.Errorf("remote Host by default: %d, want 403", status)
	}
}

func TestAllowOrigins(t *testing.T) {
	_, hs := startWS(t, AllowOrigins("https://Dash.Example:443/"))
	if status, m := postWith(t, hs, "", "https://dash.example"); status != 200 {
		t.Errorf("allowed origin: %d %+v", status, m.Error)
	}
	if status, _ := postWith(t, hs, "", "https://other.example"); status != 403 {
		t.Errorf("origin not in the list: %d, want 403", status)
	}
	_, all := startWS(t, AllowOrigins("*"))
	if status, m := postWith(t, all, "", "https://other.example"); status != 200 {
		t.Errorf(`"*": %d %+v`, status, m.Error)
	}
}

// TestWSUpgradeChecksOrigin dials with a foreign Origin (as a browser page
// would; browsers cannot send the token there, but the check must not rely
// on that) and with the server's own origin.
func TestWSUpgradeChecksOrigin(t *testing.T) {
	_, hs := startWS(t)
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	h := http.Header{"Authorization": {"Bearer " + testToken}, "Origin": {"https://evil.example"}}
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err == nil {
		ws.Close()
		t.Fatal("upgrade from a foreign origin succeeded")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %v, response %+v", err, resp)
	}
	h.Set("Origin", hs.URL)
	ws, _, err = websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		t.Fatalf("own origin: %v", err)
	}
	ws.Close()
}

// TestUpgraderCheckOrigin covers the upgrader's own check, which must hold
// even if serveHTTP stopped checking first.
func TestUpgraderCheckOrigin(t *testing.T) {
	s := newTestServer()
	req := httptest.NewRequest(http.MethodGet, "/ws", nil)
	req.Host = "127.0.0.1:4031"
	req.Header.Set("Origin", "https://evil.example")
	if s.upgrader.CheckOrigin(req) {
		t.Error("upgrader admits a foreign origin")
	}
	req.Header.Del("Origin")
	if !s.upgrader.CheckOrigin(req) {
		t.Error("upgrader refuses a client without Origin")
	}
}

func TestCanonicalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"*":                       "*",
		"http://localhost:4031":   "http://localhost:4031",
		"HTTP://LocalHost:4031/":  "http://localhost:4031",
		"http://example.com:80":   "http://example.com",
		"https://example.com:443": "https://example.com",
		"https://example.com:80":  "https://example.com:80",
		"http://[::1]:4031":       "http://[::1]:4031",
	} {
		if got, err := CanonicalOrigin(in); err != nil || got != want {
			t.Errorf("CanonicalOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "null", "localhost:4031", "ftp://x", "http://", "http://x/path", "http://u@x", "http://x?q", "http://x#f", "http://x:port"} {
		if got, err := CanonicalOrigin(bad); err == nil {
			t.Errorf("CanonicalOrigin(%q) = %q, want an error", bad, got)
		}
	}
}
