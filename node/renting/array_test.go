package renting

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

const arraySpecYAML = `name: emb
image: embedder:1
resources: {gpus: 1}
tier: bronze
max_price: 0.8
duration: {max: 1h}
array: {shards: 6, max_parallel: 2}
`

// shardStarts stands in for the auction: it records the shard jobs an
// array starts, with the shard each spec names.
type shardStarts struct {
	mu   sync.Mutex
	jobs []string
	idx  map[string]int
}

func (s *shardStarts) start(id string, spec *auction.JobSpec, _ []byte, _ map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = append(s.jobs, id)
	s.idx[id] = spec.Shard.Index
}

func (s *shardStarts) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.jobs)
}

func arrayJobs(t *testing.T, st *store.Store) (*Jobs, *shardStarts, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := New(Deps{Bg: ctx, Store: st, Log: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	s := &shardStarts{idx: map[string]int{}}
	r.runShard = s.start
	return r, s, cancel
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func endShard(r *Jobs, id, state, provider string, code int) {
	r.update(id, "", func(j *JobRecord) {
		j.State, j.Provider = state, provider
		if code != 0 {
			j.ExitCode, j.Error = &code, "exit"
		}
	})
}

// An array's shards go through the renter's node as jobs of their own,
// at most max_parallel at once; a failed shard goes again away from its
// provider; a restarted node goes on where the array was: done shards
// stay done, running ones are followed, pending ones submitted.
func TestArrayThroughJobsAndARestart(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, starts, stop := arrayJobs(t, st)
	rec, err := r.Submit([]byte(arraySpecYAML), nil, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := rec.ID
	if rec.ArrayView == nil || rec.ArrayView.Shards != 6 {
		t.Fatalf("submit returned %+v", rec)
	}
	waitFor(t, "two shards", func() bool { return len(starts.list()) == 2 })
	s0, s1 := renter.ShardJob(id, 0, 1), renter.ShardJob(id, 1, 1)
	if got := starts.list(); !slices.Equal(got, []string{s0, s1}) && !slices.Equal(got, []string{s1, s0}) {
		t.Fatalf("started %v", got)
	}
	if j, _ := r.Get(s1); j.Array != id || *j.Shard != 1 || !strings.Contains(j.Spec, "shard: {index: 1, count: 6}") {
		t.Fatalf("shard record %+v", j)
	}
	endShard(r, s0, StateCompleted, "pA", 0)
	endShard(r, s1, StateFailed, "pA", 3)
	s1b := renter.ShardJob(id, 1, 2)
	waitFor(t, "shard 2 and shard 1 again", func() bool { return len(starts.list()) == 4 })
	if j, _ := r.Get(s1b); !slices.Equal(j.Avoid, []string{"pA"}) {
		t.Fatalf("shard 1's second job avoids %v, want [pA]", j.Avoid)
	}
	v, _ := r.Get(id)
	if got := v.ArrayView.Line(); got != "1/6 done, 1 running, 1 re-auctioning, 0 failed; spent 0 credits; ETA <1m" {
		t.Fatalf("status %q", got)
	}

	// The node stops; shard 1's second job completes meanwhile (its
	// record says so when the node comes back).
	stop()
	time.Sleep(20 * time.Millisecond)
	endShard(r, s1b, StateCompleted, "pB", 0)
	r2, starts2, stop2 := arrayJobs(t, st)
	defer stop2()
	r2.resumeArrays()
	waitFor(t, "the pending shards", func() bool { return len(starts2.list()) == 1 })
	if got := starts2.list(); got[0] != renter.ShardJob(id, 3, 1) {
		t.Fatalf("after the restart started %v, want shard 3", got)
	}
	for i := 2; i < 6; i++ {
		sj := renter.ShardJob(id, i, 1)
		waitFor(t, sj, func() bool { _, err := r2.Get(sj); return err == nil })
		endShard(r2, sj, StateCompleted, "pB", 0)
	}
	waitFor(t, "the array to complete", func() bool { v, _ := r2.Get(id); return v.State == StateCompleted })
	all := append(starts.list(), starts2.list()...)
	if len(all) != 7 { // six shards, one of them twice
		t.Fatalf("started %v", all)
	}
}

func TestArrayCancelEndsEveryShard(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, starts, stop := arrayJobs(t, st)
	defer stop()
	rec, err := r.Submit([]byte(arraySpecYAML), nil, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two shards", func() bool { return len(starts.list()) == 2 })
	v, err := r.Cancel(context.Background(), rec.ID)
	if err != nil || v.State != StateCancelled {
		t.Fatalf("cancel: %v %+v", err, v)
	}
	for _, sj := range starts.list() {
		if j, _ := r.Get(sj); j.State != StateCancelled {
			t.Errorf("%s: %s", sj, j.State)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(starts.list()); n != 2 {
		t.Fatalf("%d shards started after the cancel", n-2)
	}
	// The end is durable.
	stop()
	r2, _, stop2 := arrayJobs(t, st)
	defer stop2()
	if v, _ := r2.Get(rec.ID); v.State != StateCancelled {
		t.Fatalf("after a restart: %s", v.State)
	}
}

func TestArraySubmitRefusesAShardSpec(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, _, stop := arrayJobs(t, st)
	defer stop()
	spec := strings.Replace(arraySpecYAML, "array: {shards: 6, max_parallel: 2}", "shard: {index: 0, count: 6}", 1)
	if _, err := r.Submit([]byte(spec), nil, SubmitOptions{}); err == nil || !strings.Contains(err.Error(), "shard: written by this node") {
		t.Fatalf("got %v", err)
	}
}
