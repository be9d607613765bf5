package rpc

import (
	"context"
	"sync"
	"testing"
	"time"
)

type observed struct {
	method string
	code   int
}

// Every call, batched or not, reaches the observer once with a registered
// name or "", and the code the caller saw.
func TestObserveCalls(t *testing.T) {
	ts := newTestServer()
	var mu sync.Mutex
	var got []observed
	ts.Observe(func(method string, d time.Duration, code int) {
		if d < 0 {
			t.Errorf("negative duration for %s", method)
		}
		mu.Lock()
		got = append(got, observed{method, code})
		mu.Unlock()
	})
	ctx := context.Background()
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"test_add","params":{"a":1,"b":2}}`,
		`{"jsonrpc":"2.0","id":2,"method":"no_such_method_42"}`,
		`{"jsonrpc":"2.0","id":3,"method":"test_fail"}`,
		`{"jsonrpc":"2.0","id":4,"method":"test_panic"}`,
		`[{"jsonrpc":"2.0","id":5,"method":"test_positive","params":{"n":-1}},{"jsonrpc":"2.0","method":"test_count"}]`,
	} {
		ts.process(ctx, []byte(body), nil)
	}
	want := map[observed]int{
		{"test_add", 0}: 1, {"", CodeMethodNotFound}: 1, {"test_fail", -32010}: 1,
		{"test_panic", CodeInternal}: 1, {"test_positive", CodeInvalidParams}: 1, {"test_count", 0}: 1,
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 6 {
		t.Fatalf("observed %v, want 6 calls", got)
	}
	for _, o := range got {
		if want[o] == 0 {
			t.Errorf("unexpected %+v", o)
		}
		want[o]--
	}
	ts.Observe(nil)
	ts.process(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"test_add"}`), nil)
	if len(got) != 6 {
		t.Errorf("observed after Observe(nil): %v", got[6:])
	}
}
