package console

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// fakeCaller answers RPC methods from canned results, through JSON as
// the real RPC would, or with an error.
// mu guards calls and the maps' reads: the market page calls two
// methods at once. The canned functions run outside it.
type fakeCaller struct {
	mu      sync.Mutex
	results map[string]any
	errs    map[string]error
	calls   []string
}

func (f *fakeCaller) Call(ctx context.Context, method string, params, result any) error {
	f.mu.Lock()
	f.calls = append(f.calls, method)
	err := f.errs[method]
	v, ok := f.results[method]
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if !ok {
		return &rpc.Error{Code: rpc.CodeMethodNotFound, Message: "method not found: " + method}
	}
	if fn, ok := v.(func(params any) (any, error)); ok {
		var err error
		if v, err = fn(params); err != nil {
			return err
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(b, result)
}

const testToken = "s3cret-token-of-the-repo"

func testConsole(t testing.TB, f *fakeCaller, edit func(*Options)) *Console {
	t.Helper()
	o := Options{Token: testToken, Caller: f}
	if edit != nil {
		edit(&o)
	}
	return New(o)
}

// do sends one request to c as a browser on http://127.0.0.1:4031 would.
func do(c http.Handler, method, target string, form url.Values, edit func(*http.Request)) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:4031"+target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://127.0.0.1:4031")
	}
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

// login logs in and returns the session cookie and a page's CSRF token.
func login(t *testing.T, c http.Handler) (*http.Cookie, string) {
	t.Helper()
	w := do(c, "POST", "/ui/login", url.Values{"token": {testToken}}, nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	var ck *http.Cookie
	for _, k := range w.Result().Cookies() {
		if k.Name == cookieName {
			ck = k
		}
	}
	if ck == nil {
		t.Fatal("login set no session cookie")
	}
	page := do(c, "GET", "/ui/", nil, func(r *http.Request) { r.AddCookie(ck) })
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatalf("no CSRF token on the overview (%d): %s", page.Code, page.Body)
	}
	return ck, m[1]
}

func withCookie(ck *http.Cookie) func(*http.Request) {
	return func(r *http.Request) { r.AddCookie(ck) }
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", body)
	}
}

var t0 = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func fixedClock(now *time.Time) func() time.Time { return func() time.Time { return *now } }

var tlsState = tls.ConnectionState{HandshakeComplete: true}
