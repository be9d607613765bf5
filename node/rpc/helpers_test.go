package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
)

const testToken = "test-token"

type echoParams struct {
	Text string `json:"text" doc:"text to echo"`
}

type addParams struct {
	A int `json:"a"`
	B int `json:"b"`
}

type positiveParams struct {
	N int `json:"n"`
}

func (p *positiveParams) Validate() error {
	if p.N <= 0 {
		return errors.New("n must be positive")
	}
	return nil
}

type eventParams struct {
	Count int `json:"count"`
}

type event struct {
	Seq int `json:"seq"`
}

// testServer is the fixture for goldens and WebSocket tests: small methods
// that each bump invoked, so tests can assert whether a handler ran.
type testServer struct {
	*Server
	invoked   atomic.Int64
	subEnded  chan struct{} // one value per test_events handler whose ctx ended
	subStream chan event    // test_events with count 0 forwards from here
}

var errInsufficient = &Error{Code: -32010, Message: "insufficient balance", Data: map[string]int{"needed": 5}}

func newTestServer(opts ...ServerOption) *testServer {
	opts = append([]ServerOption{MaxRequestBytes(1024), MaxBatch(8), Info("gleaner-test", "0.0.1"),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	ts := &testServer{Server: NewServer(testToken, opts...), subEnded: make(chan struct{}, 64), subStream: make(chan event)}
	s := ts.Server
	Register(s, "test_echo", MethodDoc{Summary: "Echo text back"},
		func(_ context.Context, p echoParams) (echoParams, error) { ts.invoked.Add(1); return p, nil })
	Register(s, "test_add", MethodDoc{Summary: "Add two integers"},
		func(_ context.Context, p addParams) (int, error) { ts.invoked.Add(1); return p.A + p.B, nil })
	Register(s, "test_count", MethodDoc{Summary: "Count invocations"},
		func(context.Context, struct{}) (int64, error) { return ts.invoked.Add(1), nil })
	Register(s, "test_positive", MethodDoc{Summary: "Accept a positive n"},
		func(_ context.Context, p positiveParams) (int, error) { ts.invoked.Add(1); return p.N, nil })
	Register(s, "test_fail", MethodDoc{Summary: "Fail with an application error", Errors: []*Error{errInsufficient}},
		func(context.Context, struct{}) (any, error) {
			ts.invoked.Add(1)
			return nil, errors.Join(errors.New("context"), errInsufficient) // wrapped: must still pass through
		})
	Register(s, "test_plain", MethodDoc{Summary: "Fail with a plain error"},
		func(context.Context, struct{}) (any, error) { ts.invoked.Add(1); return nil, errors.New("disk full") })
	Register(s, "test_panic", MethodDoc{Summary: "Panic"},
		func(context.Context, struct{}) (any, error) { ts.invoked.Add(1); panic("boom") })
	RegisterSubscription(s, "test_events", MethodDoc{Summary: "Emit count events, or forward subStream when count is 0"},
		func(ctx context.Context, p eventParams) (<-chan event, error) {
			ts.invoked.Add(1)
			ch := make(chan event)
			go func() {
				defer close(ch)
				for i := 1; p.Count == 0 || i <= p.Count; i++ {
					ev := event{Seq: i}
					if p.Count == 0 {
						select {
						case ev = <-ts.subStream:
						case <-ctx.Done():
							ts.subEnded <- struct{}{}
							return
						}
					}
					select {
					case ch <- ev:
					case <-ctx.Done():
						ts.subEnded <- struct{}{}
						return
					}
				}
			}()
			return ch, nil
		})
	return ts
}
