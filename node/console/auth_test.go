package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func overviewFake() *fakeCaller {
	return &fakeCaller{results: map[string]any{
		"node_info":      map[string]any{"peer_id": "12D3KooWTestPeer", "network": "local", "peers": 3},
		"ledger_balance": map[string]any{"faucet": 1000000000, "earned": 2500000, "spent": 1250000, "balance": 1001250000},
		"offer_show":     map[string]any{"offered": false, "reason": "no GPUs", "gpus": []any{}},
	}}
}

// TestConsoleNeedsLogin: every page but the login form sends a browser
// without a session to the login page, and refuses a POST outright.
func TestConsoleNeedsLogin(t *testing.T) {
	f := overviewFake()
	c := testConsole(t, f, nil)
	for _, p := range []string{"/ui/", "/ui/gpus", "/ui/jobs", "/ui/jobs/x", "/ui/market?q=gpus>=1", "/ui/earnings"} {
		w := do(c, "GET", p, nil, nil)
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/login" {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /ui/login", p, w.Code, w.Header().Get("Location"))
		}
		w = do(c, "GET", p, nil, withCookie(&http.Cookie{Name: cookieName, Value: "forged"}))
		if w.Code != http.StatusSeeOther {
			t.Errorf("GET %s with a forged cookie: %d, want 303", p, w.Code)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("the RPC was called without a session: %v", f.calls)
	}
	if w := do(c, "POST", "/ui/logout", url.Values{"csrf": {"x"}}, nil); w.Code != http.StatusForbidden {
		t.Errorf("POST /ui/logout without a session: %d, want 403", w.Code)
	}
	if w := do(c, "GET", "/ui/login", nil, nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `name="token"`) {
		t.Errorf("login form: %d", w.Code)
	}
}

// TestConsoleLoginCookie: the right token gives a session cookie with
// exactly these flags; the page then shows the RPC's figures.
func TestConsoleLoginCookie(t *testing.T) {
	c := testConsole(t, overviewFake(), func(o *Options) { o.SessionTTL = time.Hour })
	w := do(c, "POST", "/ui/login", url.Values{"token": {testToken}}, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q", w.Code, w.Header().Get("Location"))
	}
	raw := w.Header().Values("Set-Cookie")
	if len(raw) != 1 {
		t.Fatalf("Set-Cookie: %q", raw)
	}
	ck := w.Result().Cookies()[0]
	if ck.Name != cookieName || len(ck.Value) < 43 || ck.Path != "/ui" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.MaxAge != 3600 {
		t.Errorf("cookie %q: want HttpOnly, SameSite=Strict, Path=/ui, not Secure over plain HTTP, Max-Age=3600", raw[0])
	}
	for _, flag := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui"} {
		if !strings.Contains(raw[0], flag) {
			t.Errorf("Set-Cookie %q lacks %s", raw[0], flag)
		}
	}
	page := do(c, "GET", "/ui/", nil, withCookie(ck))
	if page.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", page.Code, page.Body)
	}
	mustContain(t, page.Body.String(), "12D3KooWTestPeer", "1001.25 credits", "2.5 credits", "1.25 credits", `<dd id="peers">3</dd>`)
	for h, want := range map[string]string{
		"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "same-origin", "X-Content-Type-Options": "nosniff",
	} {
		if got := page.Header().Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	// Logging out ends the session on the server, not just in the browser.
	_, csrf := login(t, c)
	out := do(c, "POST", "/ui/logout", url.Values{"csrf": {csrf}}, withCookie(ck))
	if out.Code != http.StatusForbidden { // ck's session has its own CSRF token
		t.Errorf("logout with another session's CSRF token: %d, want 403", out.Code)
	}
	ck2, csrf2 := login(t, c)
	if out := do(c, "POST", "/ui/logout", url.Values{"csrf": {csrf2}}, withCookie(ck2)); out.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d %s", out.Code, out.Body)
	}
	if w := do(c, "GET", "/ui/", nil, withCookie(ck2)); w.Code != http.StatusSeeOther {
		t.Errorf("the session still works after logout: %d", w.Code)
	}
}

// TestConsoleTLSCookieSecure: over TLS the cookie is Secure.
func TestConsoleTLSCookieSecure(t *testing.T) {
	c := testConsole(t, overviewFake(), nil)
	w := do(c, "POST", "/ui/login", url.Values{"token": {testToken}}, func(r *http.Request) {
		r.URL.Scheme = "https"
		r.TLS = &tlsState
		r.Header.Set("Origin", "https://127.0.0.1:4031")
	})
	if w.Code != http.StatusSeeOther || !w.Result().Cookies()[0].Secure {
		t.Fatalf("login over TLS: %d, cookies %q", w.Code, w.Header().Values("Set-Cookie"))
	}
}

// TestConsoleBadTokenRateLimited: a wrong token is refused with a message
// and no cookie; past the burst even the right one waits.
func TestConsoleBadTokenRateLimited(t *testing.T) {
	now := t0
	c := testConsole(t, overviewFake(), func(o *Options) { o.LoginBurst, o.LoginEvery, o.Now = 3, 10*time.Second, fixedClock(&now) })
	for i, tok := range []string{"wrong", "", testToken + "x"} {
		w := do(c, "POST", "/ui/login", url.Values{"token": {tok}}, nil)
		if w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 || !strings.Contains(w.Body.String(), "Wrong token") {
			t.Fatalf("bad token %d: %d, cookies %v", i, w.Code, w.Result().Cookies())
		}
	}
	w := do(c, "POST", "/ui/login", url.Values{"token": {testToken}}, nil)
	if w.Code != http.StatusTooManyRequests || len(w.Result().Cookies()) != 0 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("fourth attempt within the burst: %d, want 429 without a cookie", w.Code)
	}
	now = now.Add(10 * time.Second)
	if w := do(c, "POST", "/ui/login", url.Values{"token": {testToken}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("after the wait the right token: %d", w.Code)
	}
}

// TestConsoleCSRF: a POST needs this console's Origin (or Referer) and the
// session's CSRF token; a GET with a foreign Host is refused (DNS
// rebinding), as is any request under a non-loopback Host.
func TestConsoleCSRF(t *testing.T) {
	c := testConsole(t, overviewFake(), nil)
	ck, csrf := login(t, c)
	cases := []struct {
		name string
		form url.Values
		edit func(*http.Request)
	}{
		{"no CSRF token", url.Values{}, nil},
		{"wrong CSRF token", url.Values{"csrf": {csrf + "x"}}, nil},
		{"foreign Origin", url.Values{"csrf": {csrf}}, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }},
		{"other local port", url.Values{"csrf": {csrf}}, func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:3000") }},
		{"null Origin", url.Values{"csrf": {csrf}}, func(r *http.Request) { r.Header.Set("Origin", "null") }},
		{"no Origin nor Referer", url.Values{"csrf": {csrf}}, func(r *http.Request) { r.Header.Del("Origin") }},
		{"foreign Referer", url.Values{"csrf": {csrf}}, func(r *http.Request) {
			r.Header.Del("Origin")
			r.Header.Set("Referer", "http://evil.example/page")
		}},
	}
	for _, tc := range cases {
		w := do(c, "POST", "/ui/logout", tc.form, func(r *http.Request) {
			r.AddCookie(ck)
			if tc.edit != nil {
				tc.edit(r)
			}
		})
		if w.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, w.Code)
		}
	}
	// Login itself is a POST: a cross-site form cannot log a browser in.
	if w := do(c, "POST", "/ui/login", url.Values{"token": {testToken}}, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }); w.Code != http.StatusForbidden {
		t.Errorf("cross-site login: %d, want 403", w.Code)
	}
	for _, host := range []string{"evil.example", "evil.example:4031", "127.0.0.1.nip.io:4031", "foo.localhost:4031"} {
		w := do(c, "GET", "/ui/", nil, func(r *http.Request) { r.Host = host; r.AddCookie(ck) })
		if w.Code != http.StatusForbidden {
			t.Errorf("Host %s: %d, want 403", host, w.Code)
		}
	}
	// The session and its token still work: none of the above was refused
	// for a reason other than the one tested. Same-origin via Referer too.
	w := do(c, "POST", "/ui/logout", url.Values{"csrf": {csrf}}, func(r *http.Request) {
		r.AddCookie(ck)
		r.Header.Del("Origin")
		r.Header.Set("Referer", "http://127.0.0.1:4031/ui/gpus")
	})
	if w.Code != http.StatusSeeOther {
		t.Errorf("same-origin logout: %d %s", w.Code, w.Body)
	}
	// AllowRemote admits other Host names, and still checks the Origin.
	rc := testConsole(t, overviewFake(), func(o *Options) { o.AllowRemote = true })
	if w := do(rc, "GET", "/ui/login", nil, func(r *http.Request) { r.Host = "gpu-box.lan:4031" }); w.Code != http.StatusOK {
		t.Errorf("allow_remote, Host gpu-box.lan: %d", w.Code)
	}
	if w := do(rc, "POST", "/ui/login", url.Values{"token": {testToken}}, func(r *http.Request) { r.Host = "gpu-box.lan:4031" }); w.Code != http.StatusForbidden {
		t.Errorf("allow_remote, Origin 127.0.0.1 for Host gpu-box.lan: %d, want 403", w.Code)
	}
}

// TestConsoleSessionBounds: sessions expire, and there are never more
// than MaxSessions; the oldest goes first.
func TestConsoleSessionBounds(t *testing.T) {
	now := t0
	c := testConsole(t, overviewFake(), func(o *Options) {
		o.MaxSessions, o.SessionTTL, o.Now, o.LoginBurst = 2, time.Hour, fixedClock(&now), 100
	})
	a, _ := login(t, c)
	now = now.Add(time.Minute)
	b, _ := login(t, c)
	now = now.Add(time.Minute)
	cc, _ := login(t, c)
	ok := func(ck *http.Cookie) bool { return do(c, "GET", "/ui/", nil, withCookie(ck)).Code == http.StatusOK }
	if ok(a) || !ok(b) || !ok(cc) {
		t.Fatalf("after 3 logins with room for 2: oldest %v, others %v %v; want only the oldest gone", ok(a), ok(b), ok(cc))
	}
	now = now.Add(time.Hour)
	if ok(b) || ok(cc) {
		t.Fatal("sessions outlive their TTL")
	}
}

// TestMountKeepsAPI: /ui goes to the console, every other path to the API
// unchanged.
func TestMountKeepsAPI(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "api "+r.URL.Path, http.StatusNotFound) })
	m := Mount(api, testConsole(t, overviewFake(), nil))
	for path, want := range map[string]string{"/": "api /", "/uix": "api /uix", "/ws": "api /ws", "/u": "api /u"} {
		if w := do(m, "GET", path, nil, nil); !strings.Contains(w.Body.String(), want) {
			t.Errorf("%s went to %q, want the API", path, w.Body)
		}
	}
	if w := do(m, "GET", "/ui", nil, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %q", w.Code, w.Header().Get("Location"))
	}
	if w := do(m, "GET", "/ui/static/console.css", nil, nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "font") {
		t.Errorf("stylesheet: %d", w.Code)
	}
}
