package rpc

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
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
	size := 2 // the batch's brackets
	for i := range reqs {
		if !reqs[i].notification() {
			size += replySize(&reqs[i], &res[i])
		}
	}
	if size > 2 {
		out = make([]byte, 0, size) // one allocation: a batch reply can be a megabyte
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
//
// Calls are started in request order, each only while the replies of the
// calls finished so far fit the response budget; past it, the rest are
// answered with errBudget without running. So the refused calls are
// always a tail of the batch, none of them ran (a client may resend them
// as they are), and a reply is at most the budget plus the replies of the
// calls that were running when it was passed (batchPar). The first call
// always runs. Notifications are never refused: they add nothing to the
// reply, and a client could not learn that one was dropped.
func (s *Server) runBatch(ctx context.Context, reqs []request, res []result, c *wsConn) {
	var used atomic.Int64
	refuse := func(i int) bool {
		if reqs[i].notification() || reqs[i].err != nil || used.Load() <= int64(s.budget) {
			return false
		}
		res[i] = result{err: errBudget}
		return true
	}
	run := func(i int) {
		res[i] = s.call(ctx, &reqs[i], c)
		if !reqs[i].notification() {
			used.Add(int64(replySize(&reqs[i], &res[i])))
		}
	}
	if s.batchPar == 1 {
		for i := range reqs {
			if !refuse(i) {
				run(i)
			}
		}
		return
	}
	sem := make(chan struct{}, s.batchPar)
	var wg sync.WaitGroup
	for i := range reqs {
		sem <- struct{}{} // first, so that refuse sees every call finished by now
		if refuse(i) {
			<-sem
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			run(i)
		}()
	}
	wg.Wait()
}

// replySize is about how many bytes a call adds to the reply: its id, its
// result or error message, and the envelope (an error's data is not
// counted).
func replySize(r *request, res *result) int {
	n := len(`{"jsonrpc":"2.0","id":null,"result":},`) + len(r.id) + len(res.value)
	if res.err != nil {
		n += len(`"error":{"code":-32000,"message":""}`) + len(res.err.Message)
	}
	return n
}

// call runs one request. A panicking handler is logged and answered with
// -32603 so one bad method cannot take the node down.
func (s *Server) call(ctx context.Context, r *request, c *wsConn) (res result) {
	if o := s.observe.Load(); o != nil {
		// Deferred before the recover below, so it runs after it and sees
		// a panic's -32603.
		defer observeCall(*o, s, r, time.Now(), &res)
	}
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

// discoverCache is the encoded rpc.discover document and the method set it
// describes.
type discoverCache struct {
	methods *map[string]*method
	doc     []byte
}

// discoverJSON returns the encoded OpenRPC document. It changes only when a
// method is registered, so it is built once per method set and then served
// as is: asking for it costs a copy into the reply and nothing else. The
// bytes are shared; callers must not modify them.
func (s *Server) discoverJSON() ([]byte, error) {
	methods := s.methods.Load()
	if c := s.discover.Load(); c != nil && c.methods == methods {
		return c.doc, nil
	}
	b, err := json.Marshal(s.openRPC())
	if err != nil {
		return nil, err
	}
	s.discover.Store(&discoverCache{methods: methods, doc: b})
	return b, nil
}

func (s *Server) registerBuiltins() {
	Register(s, "rpc.discover", MethodDoc{Summary: "OpenRPC description of this server"},
		func(context.Context, struct{}) (*openRPCDoc, error) { return s.openRPC(), nil })
	// Registered as above for its params check, but served from the cache.
	params := newParamDecoder[struct{}]("rpc.discover", nil)
	s.lookup("rpc.discover").call = func(_ context.Context, raw json.RawMessage) ([]byte, *Error) {
		if _, e := params.decode(raw); e != nil {
			return nil, e
		}
		b, err := s.discoverJSON()
		if err != nil {
			return nil, Errorf(CodeInternal, "encoding result: %v", err)
		}
		return b, nil
	}
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
