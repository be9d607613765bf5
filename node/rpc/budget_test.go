package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serveBatch posts body to h and returns the raw reply and its entries.
func serveBatch(t *testing.T, h http.Handler, body string) ([]byte, []wsMsg) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Host = "127.0.0.1:4031"
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out []wsMsg
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("reply is not a batch: %v", err)
	}
	return rec.Body.Bytes(), out
}

// splitBudget checks that the reply is results then budget errors, ids in
// request order, and returns how many results came back.
func splitBudget(t *testing.T, out []wsMsg, n int) int {
	t.Helper()
	if len(out) != n {
		t.Fatalf("%d replies, want %d", len(out), n)
	}
	k := 0
	for i, m := range out {
		if string(m.ID) != fmt.Sprint(i) {
			t.Fatalf("reply %d has id %s", i, m.ID)
		}
		switch {
		case m.Error == nil && k == i:
			k++
		case m.Error != nil && m.Error.Code == CodeResponseBudget && strings.Contains(m.Error.Message, "send smaller batches"):
		default:
			t.Fatalf("reply %d: %+v after %d results; want results, then only %d errors", i, m, k, CodeResponseBudget)
		}
	}
	return k
}

func discoverLen(t *testing.T) int {
	doc, err := newTestServer().discoverJSON()
	if err != nil {
		t.Fatal(err)
	}
	return len(doc)
}

// TestBatchBudget: a batch of 100 rpc.discover stops producing documents
// once the budget is passed; the rest are -32005. Sequentially the cut is
// exact; with the default parallelism at most batchPar more results slip in
// (the calls already running when the budget was passed).
func TestBatchBudget(t *testing.T) {
	docLen := discoverLen(t)
	budget := 10 * docLen
	body := discoverBatch(100)
	per := replySize(&request{id: json.RawMessage("99")}, &result{value: make([]byte, docLen)})

	seq := newTestServer(MaxBatch(100), MaxRequestBytes(1<<20), ResponseBudget(budget), BatchParallelism(1))
	raw, out := serveBatch(t, seq.Handler(), body)
	k := splitBudget(t, out, 100)
	if want := budget/per + 1; k != want {
		t.Errorf("sequential: %d documents, want %d (budget %d, %d bytes each)", k, want, budget, per)
	}
	if results := bytes.Count(raw, []byte(`"openrpc"`)) * docLen; results > budget+docLen {
		t.Errorf("sequential: %d bytes of documents for a budget of %d", results, budget)
	}

	par := newTestServer(MaxBatch(100), MaxRequestBytes(1<<20), ResponseBudget(budget))
	raw, out = serveBatch(t, par.Handler(), body)
	k = splitBudget(t, out, 100)
	if k < budget/per || k > budget/per+1+par.batchPar {
		t.Errorf("parallel: %d documents, want %d to %d", k, budget/per, budget/per+1+par.batchPar)
	}
	stub := len(appendResponse(nil, json.RawMessage("99"), nil, errBudget)) + 1
	if limit := budget + (1+par.batchPar)*per + (100-k)*stub; len(raw) > limit {
		t.Errorf("parallel: reply of %d bytes, limit %d", len(raw), limit)
	}
	t.Logf("100 x rpc.discover (%d B each), budget %d: %d documents, %d-byte reply (unbudgeted: %d)", docLen, budget, k, len(raw), 100*per)
}

// TestBatchBudgetRefusedCallsDidNotRun: every call answered -32005 was
// never run, so a client may resend it; notifications are never refused.
func TestBatchBudgetRefusedCallsDidNotRun(t *testing.T) {
	ts := newTestServer(MaxBatch(100), MaxRequestBytes(1<<20), ResponseBudget(2*discoverLen(t)))
	var calls []string
	for i := range 30 {
		method := "test_count"
		if i < 10 {
			method = "rpc.discover"
		}
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i, method))
	}
	for range 3 {
		calls = append(calls, `{"jsonrpc":"2.0","method":"test_count"}`)
	}
	_, out := serveBatch(t, ts.Handler(), "["+strings.Join(calls, ",")+"]")
	k := splitBudget(t, out, 30)
	ran := 0
	for _, m := range out[10:] {
		if m.Error == nil {
			ran++
		}
	}
	if k >= 10 || ran != 0 {
		t.Fatalf("%d results, %d of them test_count: the budget did not cut in", k, ran)
	}
	if n := ts.invoked.Load(); n != 3 {
		t.Errorf("%d test_count handlers ran; want the 3 notifications only", n)
	}
}

// TestBatchBudgetFirstCallAlwaysRuns: a result larger than the whole
// budget still comes back as the first call of a batch, so resending the
// refused calls always makes progress.
func TestBatchBudgetFirstCallAlwaysRuns(t *testing.T) {
	ts := newTestServer(MaxBatch(100), ResponseBudget(1), BatchParallelism(1))
	_, out := serveBatch(t, ts.Handler(), discoverBatch(3))
	if k := splitBudget(t, out, 3); k != 1 {
		t.Errorf("%d results, want 1", k)
	}
}

// TestSmallBatchUnderBudget: an ordinary batch is untouched by the default
// budget, and each entry is the same document a single call gets.
func TestSmallBatchUnderBudget(t *testing.T) {
	ts := newTestServer(MaxBatch(100))
	_, out := serveBatch(t, ts.Handler(), discoverBatch(20))
	if k := splitBudget(t, out, 20); k != 20 {
		t.Fatalf("%d of 20 results", k)
	}
	doc, _ := ts.discoverJSON()
	for i, m := range out {
		if !bytes.Equal(m.Result, doc) {
			t.Fatalf("entry %d differs from the document", i)
		}
	}
}

// TestDiscoverCached: serving rpc.discover allocates nothing once built,
// and registering a method rebuilds it.
func TestDiscoverCached(t *testing.T) {
	ts := newTestServer()
	before, err := ts.discoverJSON()
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() { ts.discoverJSON() }); a != 0 {
		t.Errorf("%v allocations per rpc.discover", a)
	}
	Register(ts.Server, "test_late", MethodDoc{}, func(context.Context, struct{}) (int, error) { return 0, nil })
	after, _ := ts.discoverJSON()
	if bytes.Equal(before, after) || !bytes.Contains(after, []byte(`"test_late"`)) {
		t.Error("document not rebuilt after a registration")
	}
}
