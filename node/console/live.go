package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
)

// Live job logs, the services pages and the renter's spend.
//
// The job page works without script: it shows the tail of job_logs as the
// server saw it. While the job is not over, static/live.js opens a
// WebSocket to /ui/jobs/{id}/follow, which needs the session cookie and
// this console's Origin, and relays the job_follow subscription, which
// this file calls in-process (Subscriber), as small JSON messages.

// Subscriber is a Caller that can also subscribe to one of the node's
// WebSocket-only methods, as rpc.Client.Subscribe does: each event's
// result comes on the channel, closed when the subscription ends or ctx
// is done.
type Subscriber interface {
	Subscribe(ctx context.Context, method string, params any) (<-chan json.RawMessage, error)
}

// Bounds on what one follow connection relays.
const (
	followMaxBytes = 4 << 20          // log bytes per connection; then a "dropped" notice and close
	followMaxLog   = 16 << 10         // bytes of one log message (an event longer is cut)
	followLifetime = 6 * time.Hour    // a follow connection ends after this; the page can be reloaded
	followMaxOpen  = 16               // follow sockets open at once, all sessions together
	followWrite    = 10 * time.Second // a browser that cannot take a message this long is gone
	logTailBytes   = 16 << 10         // the tail of job_logs rendered server-side
	logTailLines   = 200
)

type followCount struct{ n atomic.Int32 }

// liveEvent is what the follow endpoint sends the browser: a JobEvent
// (node/renting/jobs.go) less the job ID.
type liveEvent struct {
	Type  string    `json:"type"` // state, log, dropped, error, end
	State string    `json:"state,omitempty"`
	Note  string    `json:"note,omitempty"`
	Log   string    `json:"log,omitempty"`
	Time  time.Time `json:"time,omitzero"`
}

var followUpgrader = websocket.Upgrader{
	HandshakeTimeout: 10 * time.Second,
	ReadBufferSize:   1024,
	WriteBufferSize:  16 << 10,
	// follow checks the Origin itself (sameOrigin) before upgrading.
	CheckOrigin: func(*http.Request) bool { return true },
}

// follow is GET /ui/jobs/{id}/follow: a WebSocket relaying job_follow.
// Refused with 403 without a session (no redirect: a script asked) or
// with an Origin not this console's: a WebSocket is not bound by the
// same-origin policy, so without this check any site could read a job's
// output through the browser's cookie.
func (c *Console) follow(w http.ResponseWriter, r *http.Request) {
	var se *session
	if ck, err := r.Cookie(cookieName); err == nil {
		se = c.sess.get(ck.Value)
	}
	if se == nil {
		http.Error(w, "forbidden: log in first", http.StatusForbidden)
		return
	}
	if r.Header.Get("Origin") == "" {
		http.Error(w, "forbidden: a follow request needs this console's Origin", http.StatusForbidden)
		return
	}
	if err := sameOrigin(r); err != "" {
		http.Error(w, "forbidden: "+err, http.StatusForbidden)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "this is a WebSocket endpoint (the job page's script opens it)", http.StatusBadRequest)
		return
	}
	sub, ok := c.opts.Caller.(Subscriber)
	if !ok {
		http.Error(w, "this console cannot follow jobs", http.StatusNotImplemented)
		return
	}
	if c.live.n.Add(1) > followMaxOpen {
		c.live.n.Add(-1)
		http.Error(w, fmt.Sprintf("too many live job pages open (at most %d): close some, or reload this one later", followMaxOpen), http.StatusServiceUnavailable)
		return
	}
	defer c.live.n.Add(-1)
	ws, err := followUpgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered
	}
	defer ws.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), followLifetime)
	defer cancel()
	// The browser sends nothing; reading notices its close (and answers pings).
	ws.SetReadLimit(512)
	go func() {
		defer cancel()
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	send := func(ev liveEvent) bool {
		ws.SetWriteDeadline(time.Now().Add(followWrite))
		return ws.WriteJSON(ev) == nil
	}
	events, err := sub.Subscribe(ctx, "job_follow", map[string]string{"id": r.PathValue("id")})
	if err != nil {
		send(liveEvent{Type: "error", Note: err.Error()})
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		return
	}
	id := r.PathValue("id")
	relayed := 0
	for raw := range events {
		var ev liveEvent
		if json.Unmarshal(raw, &ev) != nil {
			continue
		}
		if len(ev.Log) > followMaxLog {
			ev.Log = cutUTF8(ev.Log, followMaxLog) + "…\n"
		}
		ev.Note = cutUTF8(ev.Note, 1000)
		relayed += len(ev.Log)
		if relayed > followMaxBytes {
			send(liveEvent{Type: "dropped", Note: fmt.Sprintf("more than %d MiB of output: reload the page for the latest", followMaxBytes>>20)})
			break
		}
		if !send(ev) {
			return
		}
		if ev.Type == "dropped" {
			break
		}
	}
	if ctx.Err() == nil {
		// The stream ended: the job's, or the node's (it stops, or ended a
		// follower too slow). Which, job_status says.
		var j jobRecord
		if err := c.opts.Caller.Call(ctx, "job_status", map[string]string{"id": id}, &j); err == nil && terminalState(j.State) {
			send(liveEvent{Type: "end", State: j.State})
		} else {
			send(liveEvent{Type: "dropped", Note: "the node ended the stream"})
		}
	}
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// logTail is the end of a job's output: at most logTailLines lines and
// logTailBytes bytes, and whether anything was left off.
func logTail(s string) (string, bool) {
	cut := false
	if len(s) > logTailBytes {
		s, cut = s[len(s)-logTailBytes:], true
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		s = strings.ToValidUTF8(s, "")
	}
	if n := strings.Count(s, "\n"); n > logTailLines {
		at := 0
		for k := 0; k < n-logTailLines; k++ {
			at += strings.IndexByte(s[at:], '\n') + 1
		}
		s, cut = s[at:], true
	}
	return s, cut
}

// terminalState says whether a job's state is final (node/renting/jobs.go).
func terminalState(s string) bool {
	switch s {
	case "completed", "failed", "cancelled", "no-match":
		return true
	}
	return false
}

// Subscribe runs a subscription through the RPC server's own WebSocket
// handler, over an in-memory connection: the same authorisation and
// limits as `gleaner job logs -f`, and no socket.
func (c *inProcess) Subscribe(ctx context.Context, method string, params any) (<-chan json.RawMessage, error) {
	client, server := net.Pipe()
	l := &oneConn{c: server, done: make(chan struct{})}
	hs := &http.Server{Handler: c.api, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	d := websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		NetDialContext:   func(context.Context, string, string) (net.Conn, error) { return client, nil },
	}
	ws, resp, err := d.DialContext(ctx, "ws://127.0.0.1/ws", http.Header{"Authorization": {c.auth}})
	if err != nil {
		client.Close()
		l.Close()
		if resp != nil {
			return nil, fmt.Errorf("rpc %s: HTTP %d", method, resp.StatusCode)
		}
		return nil, fmt.Errorf("rpc %s: %w", method, err)
	}
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	fail := func(err error) (<-chan json.RawMessage, error) {
		stop()
		ws.Close()
		l.Close()
		return nil, err
	}
	if err := ws.WriteJSON(rpcRequest{JSONRPC: "2.0", ID: c.id.Add(1), Method: method, Params: params}); err != nil {
		return fail(fmt.Errorf("rpc %s: %w", method, err))
	}
	var r rpcResponse
	if err := ws.ReadJSON(&r); err != nil {
		return fail(fmt.Errorf("rpc %s: %w", method, err))
	}
	if r.Error != nil {
		return fail(r.Error)
	}
	var id string
	if err := json.Unmarshal(r.Result, &id); err != nil {
		return fail(fmt.Errorf("rpc %s: subscription id: %w", method, err))
	}
	ch := make(chan json.RawMessage)
	go func() {
		defer close(ch)
		defer l.Close()
		defer ws.Close()
		defer stop()
		for {
			var n struct {
				Method string `json:"method"`
				Params struct {
					Subscription string          `json:"subscription"`
					Result       json.RawMessage `json:"result"`
					Done         bool            `json:"done"`
				} `json:"params"`
			}
			if err := ws.ReadJSON(&n); err != nil {
				return
			}
			if n.Method != "subscription" || n.Params.Subscription != id {
				continue
			}
			if n.Params.Done {
				return
			}
			select {
			case ch <- n.Params.Result:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// oneConn is a listener that hands out one connection, then waits until
// closed.
type oneConn struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "in-process" }

// The services pages: service_list and service_status.

type serviceReplica struct {
	Index    int    `json:"index"`
	Job      string `json:"job"`
	State    string `json:"state"`
	Provider string `json:"provider"`
	Ready    bool   `json:"ready"`
}

type serviceStats struct {
	Window time.Duration `json:"window_ns"`
	gateway.Figures
	Replicas []gateway.ReplicaStats `json:"replicas"`
}

type serviceView struct {
	Name     string           `json:"name"`
	URL      string           `json:"url"`
	Gateway  string           `json:"gateway"`
	Error    string           `json:"gateway_error"`
	Port     int              `json:"port"`
	Created  time.Time        `json:"created"`
	Replicas []serviceReplica `json:"replicas"`
	Stats    *serviceStats    `json:"stats"`
}

// replicaRow is one replica with its figures, where the gateway has them.
type replicaRow struct {
	serviceReplica
	Figures *gateway.ReplicaStats
}

func (s serviceView) ReadyCount() int {
	n := 0
	for _, r := range s.Replicas {
		if r.Ready {
			n++
		}
	}
	return n
}

func (s serviceView) Rows() []replicaRow {
	out := make([]replicaRow, len(s.Replicas))
	for i, r := range s.Replicas {
		out[i].serviceReplica = r
		if s.Stats != nil {
			for k := range s.Stats.Replicas {
				if s.Stats.Replicas[k].ID == r.Job {
					out[i].Figures = &s.Stats.Replicas[k]
				}
			}
		}
	}
	return out
}

func (c *Console) services(w http.ResponseWriter, r *http.Request, se *session) {
	var list []serviceView
	if err := c.opts.Caller.Call(r.Context(), "service_list", nil, &list); err != nil {
		c.fail(w, r, se, "services", err)
		return
	}
	c.render(w, r, http.StatusOK, "services", se, map[string]any{"Title": "Services", "Active": "services", "Services": list})
}

func (c *Console) service(w http.ResponseWriter, r *http.Request, se *session) {
	var v serviceView
	if err := c.opts.Caller.Call(r.Context(), "service_status", map[string]string{"name": r.PathValue("name")}, &v); err != nil {
		c.fail(w, r, se, "services", err)
		return
	}
	d := map[string]any{"Title": "Service " + v.Name, "Active": "services", "S": v}
	c.serviceHistoryInto(d, v) // service_history.go: its figures over time
	c.render(w, r, http.StatusOK, "service", se, d)
}

// The renter's spend: ledger_spend, as `gleaner spend` shows it.

type spendLease struct {
	Day      string          `json:"day"`
	Name     string          `json:"name"`
	JobID    string          `json:"job_id"`
	Lease    string          `json:"lease"`
	Provider string          `json:"provider"`
	Spent    auction.Credits `json:"spent"`
	Source   string          `json:"source"`
}

type spendName struct {
	Name   string          `json:"name"`
	Jobs   int             `json:"jobs"`
	Leases int             `json:"leases"`
	Spent  auction.Credits `json:"spent"`
}

type spendDay struct {
	Day   string          `json:"day"`
	Spent auction.Credits `json:"spent"`
}

type spendResult struct {
	From   time.Time       `json:"from"`
	To     time.Time       `json:"to"`
	Spent  auction.Credits `json:"spent"`
	ByName []spendName     `json:"by_name"`
	Days   []spendDay      `json:"days"`
	Leases []spendLease    `json:"leases"`
}

func (c *Console) spend(w http.ResponseWriter, r *http.Request, se *session) {
	days := 14
	if d, err := strconv.Atoi(r.URL.Query().Get("days")); err == nil && d > 0 && d <= 366 {
		days = d
	}
	var s spendResult
	var bal balance
	if err := c.opts.Caller.Call(r.Context(), "ledger_spend", map[string]int{"days": days}, &s); err != nil {
		c.fail(w, r, se, "spend", err)
		return
	}
	if err := c.opts.Caller.Call(r.Context(), "ledger_balance", nil, &bal); err != nil {
		c.fail(w, r, se, "spend", err)
		return
	}
	labels := make([]string, len(s.Days))
	spent := make([]int64, len(s.Days))
	for i, d := range s.Days {
		labels[i] = d.Day
		if len(d.Day) == len("2006-01-02") {
			labels[i] = d.Day[5:]
		}
		spent[i] = int64(d.Spent)
	}
	chart := barChart("Spent per UTC day", labels, spent, func(v int64) string { return auction.FormatCredits(auction.Credits(v)) + " credits" })
	leases := s.Leases
	more := 0
	if len(leases) > 500 { // the first 500; the totals above count them all
		more = len(leases) - 500
		leases = leases[:500]
	}
	c.render(w, r, http.StatusOK, "spend", se, map[string]any{"Title": "Spend", "Active": "spend", "S": s, "Balance": bal, "Days": days, "Chart": chart, "Leases": leases, "More": more})
}

// jobLogs is job_logs' result.
type jobLogs struct {
	Logs string `json:"logs"`
}

func init() {
	// ms: a latency in milliseconds, "—" when none was measured.
	funcs["ms"] = func(d time.Duration) string {
		if d <= 0 {
			return "—"
		}
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	}
	funcs["qps"] = func(q float64) string { return strconv.FormatFloat(q, 'f', 2, 64) + " req/s" }
	funcs["perK"] = func(c auction.Credits) string { return auction.FormatCredits(c) + " credits/1k requests" }
	funcs["perM"] = func(c auction.Credits) string { return auction.FormatCredits(c) + " credits/1M tokens" }
}
