package gateway

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

func TestUsageScannerAcrossAnySplit(t *testing.T) {
	want := Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}
	bodies := map[string]string{
		"json": `{"id":"x","choices":[{"text":"a \"usage\": {\"total_tokens\":99} b"}],"usage": {"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
		"sse": "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7,\"details\":{\"x\":\"}\"}}}\n\ndata: [DONE]\n\n",
		"a key named usage in text": `{"object":"usage","usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
	}
	for name, body := range bodies {
		for cut := 0; cut <= len(body); cut++ {
			var s usageScanner
			s.Write([]byte(body[:cut]))
			s.Write([]byte(body[cut:]))
			if got, ok := s.Usage(); !ok || got != want {
				t.Fatalf("%s cut at %d: %+v %v", name, cut, got, ok)
			}
		}
		var s usageScanner
		for i := range len(body) {
			s.Write([]byte{body[i]})
		}
		if got, ok := s.Usage(); !ok || got != want {
			t.Fatalf("%s byte by byte: %+v %v", name, got, ok)
		}
	}
	var s usageScanner
	s.Write([]byte(`{"usage":{"prompt_tokens":1,"pad":"` + strings.Repeat("x", 2*maxUsageObject) + `"}}`))
	if _, ok := s.Usage(); ok {
		t.Fatal("an oversized usage object was kept")
	}
	s = usageScanner{}
	s.Write([]byte(`{"choices":[],"usage":null}`))
	if _, ok := s.Usage(); ok {
		t.Fatal("null usage counted")
	}
}

// The figures hold a fixed number of samples however many requests pass,
// and recording allocates nothing.
func TestFiguresBoundedInMemory(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	f := newFigures(10*time.Second, t0)
	o := outcome{status: 200, hasUsage: true, usage: Usage{1, 2, 3}}
	for i := range 100_000 {
		f.record(t0, time.Duration(i%1000+1)*time.Millisecond, time.Millisecond, false, o)
	}
	if allocs := testing.AllocsPerRun(1000, func() { f.record(t0, time.Millisecond, time.Millisecond, false, o) }); allocs != 0 {
		t.Fatalf("record allocates %v", allocs)
	}
	st := f.snapshot(t0, 0)
	if st.Requests != f.n || st.Tokens != 3*f.n || st.LatencyP99 > time.Second {
		t.Fatalf("%+v", st)
	}
}

func TestQPSOverTheWindow(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	g := New(Config{Window: 10 * time.Second, Now: func() time.Time { return now }})
	now = t0.Add(5 * time.Second)
	for range 100 {
		g.figs.record(now, time.Millisecond, 0, false, outcome{})
	}
	if q := g.Stats().QPS; q != 20 { // 100 over the 5 s the gateway has lived
		t.Fatalf("QPS %v, want 20", q)
	}
	now = t0.Add(12 * time.Second)
	// 100 over the window: 39 whole buckets of 250 ms and the current one
	// so far (none of it, at 12 s exactly).
	if q := g.Stats().QPS; math.Abs(q-100/9.75) > 0.01 {
		t.Fatalf("QPS %v, want %v", q, 100/9.75)
	}
	now = t0.Add(16 * time.Second)
	if q := g.Stats().QPS; q != 0 {
		t.Fatalf("QPS %v after the window, want 0", q)
	}
}

func TestPerUnitsIntegerAndSafe(t *testing.T) {
	for _, c := range []struct {
		spent      auction.Credits
		per, count uint64
		want       auction.Credits
	}{
		{1_000_000, 1000, 3, 333_333_333},
		{0, 1000, 3, 0},
		{-5, 1000, 3, 0},
		{7, 1000, 0, 0},
		{math.MaxInt64, 1_000_000, 1_000_000, math.MaxInt64},
		{math.MaxInt64, 1_000_000, 1, math.MaxInt64}, // saturates
		{math.MaxInt64 / 2, 1_000_000, 1_000_000_000, math.MaxInt64 / 2 / 1000},
	} {
		if got := perUnits(c.spent, c.per, c.count); got != c.want {
			t.Errorf("perUnits(%d, %d, %d) = %d, want %d", c.spent, c.per, c.count, got, c.want)
		}
	}
}
