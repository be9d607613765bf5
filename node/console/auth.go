package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const cookieName = "gleaner_console"

// session is one login. Its CSRF token goes into every form as a hidden
// field: a cross-site form cannot read it, so it cannot forge the POST
// even where a browser ignored SameSite.
type session struct {
	csrf    string
	created time.Time
	expires time.Time
}

// sessions is the in-memory table of logins, keyed by the sha256 of the
// cookie's value (so that neither a map lookup's timing nor a heap dump
// gives a usable cookie). mu guards m. A restart logs everyone out.
type sessions struct {
	mu  sync.Mutex
	m   map[[32]byte]*session
	ttl time.Duration
	max int
	now func() time.Time
}

func newSessions(ttl time.Duration, max int, now func() time.Time) *sessions {
	return &sessions{m: map[[32]byte]*session{}, ttl: ttl, max: max, now: now}
}

// create makes a session and returns the cookie value, dropping expired
// sessions and, past the bound, the oldest.
func (s *sessions) create() (string, *session) {
	id, csrf := randomToken(), randomToken()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest [32]byte
	var oldestAt time.Time
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		} else if oldestAt.IsZero() || v.created.Before(oldestAt) {
			oldest, oldestAt = k, v.created
		}
	}
	if len(s.m) >= s.max {
		delete(s.m, oldest)
	}
	se := &session{csrf: csrf, created: now, expires: now.Add(s.ttl)}
	s.m[sha256.Sum256([]byte(id))] = se
	return id, se
}

func (s *sessions) get(id string) *session {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[k]
	if se != nil && !s.now().Before(se.expires) {
		delete(s.m, k)
		return nil
	}
	return se
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	delete(s.m, sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// loginLimiter bounds login attempts for the whole console, not per
// client: on a loopback listener every client has the same address.
type loginLimiter struct {
	lim *rate.Limiter
	now func() time.Time
}

func newLoginLimiter(every time.Duration, burst int, now func() time.Time) *loginLimiter {
	return &loginLimiter{lim: rate.NewLimiter(rate.Every(every), burst), now: now}
}

func (l *loginLimiter) allow() bool { return l.lim.AllowN(l.now(), 1) }

// authed runs h with the request's session, or sends the browser to the
// login page. A POST must also carry the session's CSRF token.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var se *session
		if ck, err := r.Cookie(cookieName); err == nil {
			se = c.sess.get(ck.Value)
		}
		if se == nil {
			if r.Method != http.MethodGet {
				http.Error(w, "forbidden: log in first", http.StatusForbidden)
				return
			}
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) != 1 {
				http.Error(w, "forbidden: missing or wrong CSRF token; reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r, se)
	})
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", nil, map[string]any{"Title": "Log in"})
}

// loginPost compares digests so that the comparison takes the same time
// whatever the guess's length, as the RPC's bearer check does.
func (c *Console) loginPost(w http.ResponseWriter, r *http.Request) {
	if !c.login.allow() {
		w.Header().Set("Retry-After", "10")
		c.render(w, r, http.StatusTooManyRequests, "login", nil, map[string]any{"Title": "Log in", "Error": "Too many login attempts: wait a few seconds and try again."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	got := sha256.Sum256([]byte(strings.TrimSpace(r.PostFormValue("token")))) // pasted from the file, with its newline
	want := sha256.Sum256([]byte(c.opts.Token))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		c.render(w, r, http.StatusUnauthorized, "login", nil, map[string]any{"Title": "Log in", "Error": "Wrong token. It is the file rpc.token in the node's repo (gleaner console prints where)."})
		return
	}
	id, se := c.sess.create()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/ui",
		Expires: se.expires, MaxAge: int(c.opts.SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sess.drop(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
