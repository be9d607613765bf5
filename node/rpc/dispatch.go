package rpc

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"sync"
)

// result is the outcome of one call. start, set for a new subscription, is
// run only after the reply carrying its id has been queued, so the client
// never sees an event before it knows the subscription id.
type result struct {
	value []byte
	err   *Error
	start func()
}

// process runs one POST body or WebSocket message and returns the reply
// bytes, or nil when nothing must be sent (only notifications).
func (s *Server) process(ctx context.Context, body []byte, c *wsConn) (out []byte, starts []func()) {
	reqs, batch, derr := decodeRequest(body, s.maxBatch)
	if derr != nil {
		return appendResponse(nil, nil, nil, derr), nil
	}
	res := make([]result, len(reqs))
	if len(reqs) == 1 {
		res[0] = s.call(ctx, &reqs[0], c)
	} else {
		s.runBatch(ctx, reqs, res, c)
	}
	if batch {
		out = append(out, '[')
	}
	n := 0
	for i := range reqs {
		if res[i].start != nil {
			starts = append(starts, res[i].start)
		}
		if reqs[i].notification() {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = appendResponse(out, reqs[i].id, res[i].value, res[i].err)
		n++
	}
	if n == 0 {
		return nil, starts
	}
	if batch {
		out = append(out, ']')
	}
	return out, starts
}

// runBatch runs a batch's calls concurrently, at most batchPar at a time:
// the spec lets calls in a batch run in any order, and a slow call (a peer
// query) should not serialise the quick ones behind it. Replies keep
// request order for determinism.
func (s *Server) runBatch(ctx context.Context, reqs []request, res []result, c *wsConn) {
	if s.batchPar == 1 {
		for i := range reqs {
			res[i] = s.call(ctx, &reqs[i], c)
		}
		return
	}
	sem := make(chan struct{}, s.batchPar)
	var wg sync.WaitGroup
	for i := range reqs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			res[i] = s.call(ctx, &reqs[i], c)
		}()
	}
	wg.Wait()
}

// call runs one request. A panicking handler is logged and answered with
// -32603 so one bad method cannot take the node down.
func (s *Server) call(ctx context.Context, r *request, c *wsConn) (res result) {
	if r.err != nil {
		return result{err: r.err}
	}
	m := s.lookup(r.method)
	if m == nil {
		return result{err: Errorf(CodeMethodNotFound, "method not found: %q", r.method)}
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("rpc: handler panic", "method", r.method, "panic", v, "stack", string(debug.Stack()))
			res = result{err: errPanic}
		}
	}()
	if m.subscribe == nil {
		v, e := m.call(withConn(ctx, c), r.params)
		return result{value: v, err: e}
	}
	if c == nil {
		return result{err: Errorf(CodeNeedsWebSocket, "%s is a subscription: connect over WebSocket (GET /ws)", r.method)}
	}
	if r.notification() {
		return result{} // nobody would learn the id; starting it would only leak a slot
	}
	sub, e := c.newSubscription()
	if e != nil {
		return result{err: e}
	}
	run, e := m.subscribe(sub.ctx, r.params)
	if e != nil {
		sub.discard()
		return result{err: e}
	}
	id, _ := json.Marshal(sub.id)
	return result{value: id, start: func() { sub.start(run) }}
}

type connKey struct{}

// withConn lets built-ins such as unsubscribe reach the WebSocket
// connection a call arrived on; it is nil over HTTP.
func withConn(ctx context.Context, c *wsConn) context.Context {
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, c)
}

type unsubscribeParams struct {
	ID string `json:"id" doc:"subscription id returned by the subscribing call"`
}

func (s *Server) registerBuiltins() {
	Register(s, "rpc.discover", MethodDoc{Summary: "OpenRPC description of this server"},
		func(context.Context, struct{}) (*openRPCDoc, error) { return s.openRPC(), nil })
	Register(s, "unsubscribe", MethodDoc{Summary: "End a subscription on this connection", ParamNames: []string{"id"}},
		func(ctx context.Context, p unsubscribeParams) (bool, error) {
			c, _ := ctx.Value(connKey{}).(*wsConn)
			if c == nil {
				return false, Errorf(CodeNeedsWebSocket, "unsubscribe needs the WebSocket connection that subscribed")
			}
			// false (not an error) for an unknown id: unsubscribing is
			// idempotent, and the subscription may just have ended by itself.
			return c.unsubscribe(p.ID), nil
		})
	for _, name := range []string{"rpc.discover", "unsubscribe"} {
		s.lookup(name).builtin = true
	}
}
