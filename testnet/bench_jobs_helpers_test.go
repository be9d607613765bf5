package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gorilla/websocket"
)

// Scaffolding for bench_jobs_test.go: a JSON-RPC client that keeps one
// WebSocket open for calls and subscriptions (so that job_follow is
// registered one loopback round trip after job_submit returns, with no
// handshake in between), and the latency label.

// benchLatency reads GLEANER_BENCH_NETEM (the one-way delay that netem adds
// to loopback, e.g. "25ms") and checks it against a measured TCP handshake
// on 127.0.0.1, so that results are never labelled with a latency they did
// not run under. It returns the label's delay and the measured round trip.
func benchLatency(tb testing.TB) (oneWay, rtt time.Duration) {
	tb.Helper()
	if s := os.Getenv("GLEANER_BENCH_NETEM"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			tb.Fatalf("GLEANER_BENCH_NETEM=%q: want a duration such as 25ms", s)
		}
		oneWay = d
	}
	rtt = loopbackRTT(tb)
	switch {
	case oneWay > 0 && rtt < oneWay*3/2:
		tb.Fatalf("GLEANER_BENCH_NETEM=%v, but a loopback TCP handshake takes %v: run the benchmark inside the netem namespace (see the top of bench_jobs_test.go)", oneWay, rtt)
	case oneWay == 0 && rtt > 10*time.Millisecond:
		tb.Fatalf("a loopback TCP handshake takes %v: set GLEANER_BENCH_NETEM to the one-way delay netem adds, so that the results are labelled", rtt)
	}
	return oneWay, rtt
}

// loopbackRTT is the smallest of a few TCP connects to 127.0.0.1: one round
// trip (SYN, SYN-ACK) each.
func loopbackRTT(tb testing.TB) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	best := time.Duration(math.MaxInt64)
	for range 5 {
		t0 := time.Now()
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			tb.Fatal(err)
		}
		best = min(best, time.Since(t0))
		c.Close()
	}
	return best
}

// percentile is the nearest-rank p-quantile (0 < p <= 1) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// --- a JSON-RPC client over one long-lived WebSocket ---

// wsClient sends calls and receives replies and subscription notifications
// over one WebSocket. Every frame is stamped with the time it was read, so
// that a goroutine scheduled late does not inflate a latency.
type wsClient struct {
	conn *websocket.Conn
	wmu  sync.Mutex // serialises writes

	mu      sync.Mutex // guards the fields below
	next    uint64
	pending map[uint64]chan wsReply
	subs    map[string]chan wsNote
	err     error // why the reader stopped
	closed  chan struct{}
}

type wsReply struct {
	result json.RawMessage
	err    *rpc.Error
	at     time.Time
}

// wsNote is one subscription notification; done marks the last one.
type wsNote struct {
	result json.RawMessage
	done   bool
	err    *rpc.Error
	at     time.Time
}

func dialWS(tb testing.TB, n *node.Node) *wsClient {
	tb.Helper()
	tok, err := n.Repo().Token()
	if err != nil {
		tb.Fatal(err)
	}
	url := "ws" + strings.TrimPrefix(strings.TrimRight(n.RPCURL(), "/"), "http") + "/ws"
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, _, err := d.Dial(url, http.Header{"Authorization": {"Bearer " + tok}})
	if err != nil {
		tb.Fatalf("dial %s: %v", url, err)
	}
	c := &wsClient{conn: conn, pending: map[uint64]chan wsReply{}, subs: map[string]chan wsNote{}, closed: make(chan struct{})}
	go c.readLoop()
	tb.Cleanup(func() { conn.Close() })
	return c
}

func (c *wsClient) readLoop() {
	var err error
	defer func() {
		c.mu.Lock()
		c.err = err
		for _, ch := range c.subs {
			close(ch)
		}
		c.subs = nil
		c.mu.Unlock()
		close(c.closed)
	}()
	for {
		var data []byte
		if _, data, err = c.conn.ReadMessage(); err != nil {
			return
		}
		at := time.Now()
		var m struct {
			ID     *uint64         `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *rpc.Error      `json:"error"`
			Params struct {
				Subscription string          `json:"subscription"`
				Result       json.RawMessage `json:"result"`
				Done         bool            `json:"done"`
				Error        *rpc.Error      `json:"error"`
			} `json:"params"`
		}
		if err = json.Unmarshal(data, &m); err != nil {
			err = fmt.Errorf("undecodable frame %q: %w", data, err)
			return
		}
		c.mu.Lock()
		switch {
		case m.Method == "subscription":
			ch := c.subLocked(m.Params.Subscription)
			select {
			case ch <- wsNote{result: m.Params.Result, done: m.Params.Done, err: m.Params.Error, at: at}:
			default:
				err = fmt.Errorf("subscription %s: more than %d notifications unread", m.Params.Subscription, cap(ch))
			}
		case m.ID != nil:
			if ch := c.pending[*m.ID]; ch != nil {
				delete(c.pending, *m.ID)
				ch <- wsReply{result: m.Result, err: m.Error, at: at}
			}
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// subLocked returns the queue of a subscription, creating it: the first
// notification may be read before the caller has seen the subscription ID.
func (c *wsClient) subLocked(id string) chan wsNote {
	ch := c.subs[id]
	if ch == nil {
		ch = make(chan wsNote, 1024)
		c.subs[id] = ch
	}
	return ch
}

// subscription returns the notifications of subscription id.
func (c *wsClient) subscription(id string) <-chan wsNote {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil { // the connection is gone
		ch := make(chan wsNote)
		close(ch)
		return ch
	}
	return c.subLocked(id)
}

// forget drops a finished subscription's queue.
func (c *wsClient) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.subs, id)
}

// call sends one request and decodes the reply into out; it returns when
// the reply frame was read.
func (c *wsClient) call(ctx context.Context, method string, params, out any) (time.Time, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return time.Time{}, err
	}
	ch := make(chan wsReply, 1)
	c.mu.Lock()
	if c.subs == nil {
		err := c.err
		c.mu.Unlock()
		return time.Time{}, fmt.Errorf("websocket closed: %v", err)
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": json.RawMessage(raw)})
	c.wmu.Lock()
	err = c.conn.WriteMessage(websocket.TextMessage, req)
	c.wmu.Unlock()
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.at, fmt.Errorf("%s: %w", method, r.err)
		}
		if out != nil {
			if err := json.Unmarshal(r.result, out); err != nil {
				return r.at, fmt.Errorf("%s: decoding %s: %w", method, r.result, err)
			}
		}
		return r.at, nil
	case <-c.closed:
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return time.Time{}, fmt.Errorf("%s: websocket closed: %v", method, err)
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return time.Time{}, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}
