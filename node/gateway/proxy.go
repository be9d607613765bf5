package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What a replica may do to a request, and what the client then sees:
//
//   - It fails before the gateway has sent the client any byte (the dial
//     fails, the connection drops, the headers are late, too large, or the
//     body fails before its first byte): an idempotent request (GET, HEAD,
//     OPTIONS, TRACE, or any with an Idempotency-Key or X-Idempotency-Key
//     header) whose body was kept (at most MaxReplayBody) is sent to the
//     next replica by score, up to MaxAttempts replicas. Any request is
//     sent on when the dial failed, since nothing of it left the gateway.
//     Otherwise the client gets 502 (504 for late headers) with an
//     OpenAI-style error body.
//   - It fails after: the client's connection is aborted (no final chunk,
//     or a short Content-Length body), so that a cut answer never looks
//     whole. It is never retried: the client may have acted on the bytes.
//   - It sends more than MaxResponseBytes of body, or falls silent inside
//     the body for IdleTimeout: cut as above, counted as its error.
//
// The gateway commits to a replica's answer at the answer's first body
// byte (or its end, for an empty body): headers are held until then, so
// that a replica that dies between headers and body can still be retried.

// dialError marks a failure to open a connection to a replica: the
// request did not leave the gateway.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial replica: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

var (
	errTooLarge  = errors.New("response body over the gateway's limit")
	errIdle      = errors.New("response body silent past the gateway's idle timeout")
	errNoReplica = errors.New("no ready replica")
)

// idempotent reports whether r may be sent to a second replica after the
// first may have seen it. POST /v1/completions is not, unless the client
// says so with an Idempotency-Key.
func idempotent(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k := r.Header["Idempotency-Key"]
	_, x := r.Header["X-Idempotency-Key"]
	return k || x
}

// outcome is one attempt on one replica.
type outcome struct {
	committed  bool // the client has the status and headers
	status     int
	err        error // the replica's failure
	dialFailed bool
	clientGone bool
	abort      bool // the client must see an aborted response
	firstByte  time.Duration
	usage      Usage
	hasUsage   bool
}

// ServeHTTP forwards r to a replica, once guard.go's checks admit it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	acc := g.acc.Load()
	if status, msg := acc.refusal(r); status != 0 {
		refuse(w, status, msg) // before anything is counted or sent on
		return
	}
	if r.Method == http.MethodConnect {
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "the service gateway does not tunnel")
		return
	}
	body, err := readBody(r, g.cfg.MaxReplayBody)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request_body", "reading the request body: "+err.Error())
		return
	}
	idem := idempotent(r)
	var tried []*replica
	var o outcome
	for len(tried) < g.cfg.MaxAttempts {
		rep := g.pick(tried)
		if rep == nil {
			break
		}
		if len(tried) > 0 {
			g.figs.retry()
		}
		tried = append(tried, rep)
		o = g.forward(w, r, rep, body, start, acc.token)
		if o.committed || o.clientGone || o.err == nil {
			break
		}
		if !body.replayable() || !(idem || o.dialFailed) {
			break
		}
	}
	switch {
	case o.clientGone && !o.committed:
		g.figs.record(g.cfg.Now(), time.Since(start), 0, false, outcome{})
		return
	case len(tried) == 0:
		o.err = errNoReplica
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "no_ready_replica",
			fmt.Sprintf("service %q has no ready replica", g.cfg.Service))
	case !o.committed:
		status, code := classify(o.err)
		writeError(w, status, code, fmt.Sprintf("service %q: %d replica(s) tried, last: %v", g.cfg.Service, len(tried), o.err))
	}
	failed := o.err != nil || o.status >= 500
	g.figs.record(g.cfg.Now(), time.Since(start), o.firstByte, failed && !o.clientGone, o)
	if o.abort {
		panic(http.ErrAbortHandler) // net/http closes the connection without logging
	}
}

// forward makes one attempt of r on rep; rep was counted outstanding by
// pick.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, rep *replica, body *reqBody, start time.Time, dropAuth bool) (o outcome) {
	t0 := time.Now()
	defer func() {
		rep.outstanding.Add(-1)
		if o.dialFailed {
			g.noteFailure(rep)
		}
		failed := (o.err != nil || o.status >= 500) && !o.clientGone
		var fb time.Duration
		if o.committed {
			fb = o.firstByte - t0.Sub(start)
		}
		rep.figs.record(g.cfg.Now(), time.Since(t0), fb, failed, o)
	}()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := &http.Request{
		Method:        r.Method,
		URL:           &url.URL{Scheme: "http", Host: "replica", Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        outHeader(r.Header, dropAuth),
		Host:          r.Host,
		ContentLength: body.size,
	}
	out.Body, out.GetBody = body.reader()
	resp, err := rep.tr.RoundTrip(out.WithContext(ctx))
	if err != nil {
		if r.Context().Err() != nil {
			o.clientGone = true
			return o
		}
		var de *dialError
		o.err, o.dialFailed = err, errors.As(err, &de)
		return o
	}
	defer resp.Body.Close()
	if resp.ContentLength > g.cfg.MaxResponseBytes {
		o.err = fmt.Errorf("%w: Content-Length %d, limit %d", errTooLarge, resp.ContentLength, g.cfg.MaxResponseBytes)
		return o
	}

	var idled atomic.Bool
	idle := time.AfterFunc(g.cfg.IdleTimeout, func() { idled.Store(true); cancel() })
	defer idle.Stop()
	bodyErr := func(err error) error {
		if idled.Load() {
			return errIdle
		}
		return fmt.Errorf("response body: %w", err)
	}
	bufp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bufp)
	buf := *bufp
	n, rerr := readSome(resp.Body, buf)
	if n == 0 && rerr != nil && rerr != io.EOF {
		if r.Context().Err() != nil {
			o.clientGone = true
		} else {
			o.err = bodyErr(rerr)
		}
		return o
	}

	// Commit: from here the client has bytes of this answer.
	h := w.Header()
	for k, vv := range resp.Header {
		if !hopByHop(k) {
			h[k] = vv
		}
	}
	h["X-Gleaner-Replica"] = rep.idHeader // shared, never modified: no allocation per answer
	w.WriteHeader(resp.StatusCode)
	o.committed, o.status, o.firstByte = true, resp.StatusCode, time.Since(start)
	flusher, _ := w.(http.Flusher)
	var scan *usageScanner
	if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "json") || strings.Contains(ct, "event-stream") {
		scan = &usageScanner{}
	}
	var total int64
	for {
		if n > 0 {
			cut := false
			if total+int64(n) > g.cfg.MaxResponseBytes {
				n, cut = int(g.cfg.MaxResponseBytes-total), true
			}
			total += int64(n)
			if scan != nil {
				scan.Write(buf[:n])
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				o.clientGone = true
				break
			}
			// The last bytes are not flushed here: they leave when
			// ServeHTTP returns, after the figures have the request, so
			// that a client that has its whole answer sees it counted
			// (and a whole small answer goes in one write).
			last := rerr == io.EOF || resp.ContentLength >= 0 && total == resp.ContentLength
			if flusher != nil && !last {
				flusher.Flush()
			}
			if cut {
				o.err, o.abort = errTooLarge, true
				break
			}
		}
		if rerr != nil {
			if rerr != io.EOF {
				if r.Context().Err() != nil {
					o.clientGone = true
				} else {
					o.err = bodyErr(rerr)
				}
				o.abort = true
			}
			break
		}
		idle.Reset(g.cfg.IdleTimeout)
		n, rerr = resp.Body.Read(buf)
	}
	if scan != nil && o.err == nil && !o.clientGone {
		o.usage, o.hasUsage = scan.Usage()
	}
	return o
}

// noteFailure counts a failure of rep toward taking it out; a dial that
// fails counts as a failed probe.
func (g *Gateway) noteFailure(rep *replica) {
	if int(rep.fails.Add(1)) >= g.cfg.FailThreshold {
		g.setReady(rep, false)
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readSome reads until it has a byte or an error.
func readSome(r io.Reader, buf []byte) (int, error) {
	for {
		n, err := r.Read(buf)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// reqBody is a request's body as kept for replay: all of it when it is at
// most MaxReplayBody, else a prefix and the rest unread (one attempt only).
type reqBody struct {
	buf  []byte
	rest io.Reader // nil: buf is the whole body
	size int64     // Content-Length to send; -1 unknown
}

func readBody(r *http.Request, limit int64) (*reqBody, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return &reqBody{}, nil
	}
	if r.ContentLength > limit {
		return &reqBody{rest: r.Body, size: r.ContentLength}, nil
	}
	if r.ContentLength > 0 { // known and within the limit: one allocation of its size
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return &reqBody{buf: buf, size: r.ContentLength}, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) <= limit {
		return &reqBody{buf: buf, size: int64(len(buf))}, nil
	}
	return &reqBody{buf: buf, rest: r.Body, size: r.ContentLength}, nil
}

func (b *reqBody) replayable() bool { return b.rest == nil }

func (b *reqBody) reader() (io.ReadCloser, func() (io.ReadCloser, error)) {
	if b.rest != nil {
		return io.NopCloser(io.MultiReader(bytes.NewReader(b.buf), b.rest)), nil
	}
	if len(b.buf) == 0 {
		return http.NoBody, nil
	}
	get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.buf)), nil }
	rc, _ := get()
	return rc, get
}

// hopByHop reports headers that belong to one connection (RFC 9110 7.6.1).
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// outHeader is the client's header for the replica: without hop-by-hop
// headers (so no upgrades: websockets are not passed), and without
// Accept-Encoding, so that answers come uncompressed and the gateway can
// read their usage. dropAuth also leaves out Authorization: the
// gateway's own token is no business of the provider's.
func outHeader(in http.Header, dropAuth bool) http.Header {
	out := make(http.Header, len(in))
	for k, vv := range in {
		if hopByHop(k) || k == "Accept-Encoding" || dropAuth && k == "Authorization" {
			continue
		}
		out[k] = vv
	}
	for _, v := range in["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			delete(out, textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(f)))
		}
	}
	return out
}

// classify maps a replica's failure before commit to the client's status
// and error code.
func classify(err error) (int, string) {
	var de *dialError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return http.StatusBadGateway, "replica_unreachable"
	case errors.Is(err, errTooLarge) || err != nil && strings.Contains(err.Error(), "response headers exceeded"):
		return http.StatusBadGateway, "replica_response_too_large"
	case errors.Is(err, errIdle) || errors.As(err, &ne) && ne.Timeout():
		return http.StatusGatewayTimeout, "replica_timeout"
	}
	return http.StatusBadGateway, "replica_failed"
}

// writeError answers with OpenAI's error object, which clients of an
// OpenAI-style service already parse.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "gateway_error", "param": nil, "code": code,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
