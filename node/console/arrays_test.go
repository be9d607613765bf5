package console

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node/renting"
)

func consoleArray() jobRecord {
	eta := int64(240)
	return jobRecord{ID: "emb-a1", Name: "emb", State: "running", Created: t0, ArrayView: &arrayView{
		Shards: 3, MaxParallel: 2, Done: 1, Running: 1, Waiting: 1, Spent: 500_000, ETASeconds: &eta,
		ShardJobs: []shardView{
			{Index: 0, Phase: "done", Job: "emb-a1-s0", State: "completed", Provider: "12D3KooWProviderOne", Attempts: 1, Outputs: "bafyout0", Files: 4},
			{Index: 1, Phase: "in-flight", Job: "emb-a1-s1-2", State: "running", Provider: "12D3KooWProviderTwo", Attempts: 2, Files: 3},
			{Index: 2, Phase: "pending", Files: 3},
		}}}
}

// The jobs page shows an array as one row with its progress, and not
// its shards' jobs beside it; a shard whose array is not listed stays.
func TestJobsPageShowsAnArrayAsOneRow(t *testing.T) {
	arr := consoleArray()
	f := &fakeCaller{results: map[string]any{"job_list": []jobRecord{
		arr,
		{ID: "emb-a1-s0", Name: "emb", State: "completed", Array: "emb-a1", Created: t0},
		{ID: "emb-a1-s1-2", Name: "emb", State: "running", Array: "emb-a1", Created: t0},
		{ID: "train-1", Name: "train", State: "running", Created: t0},
		{ID: "gone-s0", Name: "gone", State: "completed", Array: "gone", Created: t0},
	}}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/jobs", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	mustContain(t, body, `3 job(s), newest first`,
		`<a href="/ui/jobs/emb-a1">emb</a> <span class="tag">array</span>`,
		`<progress max="3" value="1" aria-label="shards done">1/3</progress> <span class="array-line">1/3 done, 1 running, 0 re-auctioning, 0 failed; spent 0.5 credits; ETA 4m</span>`,
		`/ui/jobs/train-1`, `/ui/jobs/gone-s0`)
	for _, shard := range []string{"emb-a1-s0", "emb-a1-s1-2"} {
		if strings.Contains(body, shard) {
			t.Errorf("the jobs page lists the array's shard %s beside it", shard)
		}
	}
}

// An array's page is its progress and a row per shard linking to the
// shard's job; it asks for no auction or output of the array itself.
func TestArrayPageListsItsShards(t *testing.T) {
	f := &fakeCaller{results: map[string]any{"job_status": consoleArray()}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/jobs/emb-a1", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(), `<title>Array emb`,
		`<span id="array-line">1/3 done, 1 running, 0 re-auctioning, 0 failed; spent 0.5 credits; ETA 4m</span>`,
		`at most 2 shard(s); 1 waiting`,
		`<td>0 <small>(4 file(s))</small></td>`,
		`<a href="/ui/jobs/emb-a1-s0"><code class="job-id">emb-a1-s0</code></a>`,
		`<a href="/ui/jobs/emb-a1-s0/outputs.tar" download>tar</a>`,
		`<a href="/ui/jobs/emb-a1-s1-2">`, `<td class="state">pending</td>`)
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(f.calls, "job_explain") || slices.Contains(f.calls, "job_logs") {
		t.Errorf("the array's page called %v", f.calls)
	}
}

// The console reads the node's array_view under its JSON names and words
// the progress as the CLI does.
func TestConsoleArrayViewMatchesTheNodes(t *testing.T) {
	eta := int64(3700)
	nv := renting.ArrayView{Shards: 9, MaxParallel: 3, Done: 4, Running: 1, Auction: 1, Reauctioning: 1, Waiting: 1, Failed: 1,
		Retries: 2, Spent: 1_234_567, Reason: "why", ETASeconds: &eta,
		ShardJobs: []renting.ShardView{{Index: 5, Phase: "done", Job: "j", State: "completed", Provider: "p", Attempts: 2, Outputs: "o", Files: 7}}}
	b, err := json.Marshal(nv)
	if err != nil {
		t.Fatal(err)
	}
	var cv arrayView
	if err := json.Unmarshal(b, &cv); err != nil {
		t.Fatal(err)
	}
	if cv.Line() != nv.Line() {
		t.Fatalf("console %q, node %q", cv.Line(), nv.Line())
	}
	want := shardView{Index: 5, Phase: "done", Job: "j", State: "completed", Provider: "p", Attempts: 2, Outputs: "o", Files: 7}
	if len(cv.ShardJobs) != 1 || cv.ShardJobs[0] != want || cv.Retries != 2 || cv.Waiting != 1 || cv.MaxParallel != 3 || cv.Reason != "why" {
		t.Fatalf("read %+v", cv)
	}
}
