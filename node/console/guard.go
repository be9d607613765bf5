package console

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// The guards. The session cookie keeps out whoever lacks the token; these
// keep out web pages, which can make a browser send requests here but
// cannot choose their Host or Origin headers (rpc/guard.go explains the
// attacks; the console adds the per-session CSRF token of auth.go, since
// a browser, unlike the CLI, carries its credential on its own).

// securityHeaders: no script but the console's own files (live.js; no
// inline script, no eval), no connection but to this origin (the job
// page's WebSocket), no framing
// (clickjacking), nothing cached (pages hold balances and job specs).
//
// Referrer-Policy is same-origin rather than no-referrer: under
// no-referrer Chromium sends "Origin: null" with a form POST, which the
// Origin check must refuse; same-origin still sends nothing to other sites.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// sameOrigin returns why a state-changing request is refused, "" if it
// came from a page of this console: its Origin (or, without one, its
// Referer's origin) must be this request's own scheme://Host. A request
// with neither is refused: every browser this console supports sends
// Origin with a POST, and a non-browser client has the RPC.
func sameOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own, err := rpc.CanonicalOrigin(scheme + "://" + r.Host)
	if err != nil {
		return "bad Host " + quoteShort(r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		ref, err := url.Parse(r.Header.Get("Referer"))
		if err != nil || ref.Host == "" {
			return "a request that changes state needs an Origin or Referer header of this console"
		}
		origin = ref.Scheme + "://" + ref.Host
	}
	got, err := rpc.CanonicalOrigin(origin)
	if err != nil || got != own {
		return fmt.Sprintf("Origin %s is not this console's (%s)", quoteShort(origin), own)
	}
	return ""
}

func quoteShort(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return fmt.Sprintf("%q", s)
}
