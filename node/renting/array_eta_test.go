package renting

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

// The array's view estimates from its shards' jobs' times: two done in
// 8 and 12 minutes (10 on average), two in flight for 4 and 12 minutes,
// two waiting: 20 + 6 + 0 minutes of work over 2 in flight is 13 minutes.
// No estimate before a shard is done, nor once the array has ended.
func TestArrayViewETAOnFixedTimes(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, _, stop := arrayJobs(t, st)
	defer stop()
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := t0.Add(30 * time.Minute)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	ended := func(min int) *time.Time { e := at(min); return &e }
	snap := renter.NewArray("a", 6, 2).Snapshot()
	phase := []string{renter.ShardDone, renter.ShardDone, renter.ShardInFlight, renter.ShardInFlight, renter.ShardPending, renter.ShardPending}
	var recs []JobRecord
	for i, p := range phase {
		snap.Shards[i].Phase = p
		if p == renter.ShardPending {
			continue
		}
		snap.Shards[i].Job = renter.ShardJob("a", i, 1)
		recs = append(recs, JobRecord{ID: snap.Shards[i].Job, State: StateRunning, Array: "a"})
	}
	recs[0].State, recs[0].Created, recs[0].EndedAt = StateCompleted, at(0), ended(8)
	recs[1].State, recs[1].Created, recs[1].Updated = StateCompleted, at(2), at(14) // no exit time: its last update
	recs[2].Created = now.Add(-4 * time.Minute)
	recs[3].Created = now.Add(-12 * time.Minute)
	r.Hold(recs, nil)
	run := &arrayRun{a: renter.RestoreArray(snap), rec: ArrayRecord{ID: "a", Shards: 6, MaxParallel: 2}}

	v := r.arrayViewAt(run, now).ArrayView
	if v.ETASeconds == nil || *v.ETASeconds != 13*60 {
		t.Fatalf("ETA %v, want 780s", v.ETASeconds)
	}
	if got, want := v.Line(), "2/6 done, 2 running, 0 re-auctioning, 0 failed; spent 0 credits; ETA 13m"; got != want {
		t.Fatalf("line %q, want %q", got, want)
	}

	snap.Shards[0].Phase, snap.Shards[1].Phase = renter.ShardInFlight, renter.ShardInFlight
	run.a = renter.RestoreArray(snap)
	if v := r.arrayViewAt(run, now).ArrayView; v.ETASeconds != nil {
		t.Fatalf("an estimate with no shard done: %ds", *v.ETASeconds)
	}
	snap.Shards[0].Phase, snap.Shards[1].Phase = renter.ShardDone, renter.ShardDone
	ended2 := renter.RestoreArray(snap)
	ended2.Cancel()
	run.a = ended2
	if v := r.arrayViewAt(run, now).ArrayView; v.ETASeconds != nil {
		t.Fatalf("an estimate for an ended array: %ds", *v.ETASeconds)
	}
}
