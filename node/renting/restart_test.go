package renting

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

// What a restarted node does with each job its store holds: a job waiting
// in a re-auction with its lifecycle goes on (unless it needs secrets),
// so does one in its first auction, one leased is followed again, a
// canary in its auction fails, and a service's replica is left to its
// keeper's old path.
func TestARestartSortsTheJobsItFinds(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	life := &renter.Snapshot{Leases: 1, Preemptions: 1, LastEnd: renter.EndPreempted, LastProvider: "p", LastResort: []string{"p"}}
	recs := []JobRecord{
		{ID: "waiting", State: StateAuction, Lease: []byte("old"), Life: life},
		{ID: "secret", State: StateAuction, Lease: []byte("old"), Life: life, Secrets: true},
		{ID: "replica", State: StateAuction, Lease: []byte("old"), Life: life, Service: "web"},
		{ID: "leased", State: StateRunning, Lease: []byte("now"), Life: life},
		{ID: "first", State: StateAuction},
		{ID: "first-secret", State: StateAuction, Secrets: true},
		{ID: "canary", State: StateAuction, Canary: true},
	}
	if err := st.Update(func(tx *store.Tx) error {
		for _, j := range recs {
			if err := tx.Put(store.BucketJobs, j.ID, j); err != nil {
				return err
			}
		}
		return tx.Put(store.BucketCheckpoints, "waiting", []byte("step-600"))
	}); err != nil {
		t.Fatal(err)
	}
	r, err := New(Deps{Bg: context.Background(), Store: st, Log: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(slices.Values(r.waiting)), []string{"first", "waiting"}) || !slices.Equal(slices.Sorted(slices.Values(r.resuming)), []string{"leased", "replica"}) {
		t.Fatalf("waiting %v, resuming %v; want [first waiting], [leased replica]", r.waiting, r.resuming)
	}
	for id, want := range map[string]string{"secret": "secrets were never stored", "first-secret": "secrets were never stored", "canary": "during the auction"} {
		if j, _ := r.Get(id); j.State != StateFailed || !strings.Contains(j.Error, want) {
			t.Errorf("%s: %s (%s), want failed saying %q", id, j.State, j.Error, want)
		}
	}
	j, _ := r.Get("waiting")
	restored, err := r.restore(j, &auction.JobSpec{Image: "x"})
	if err != nil || string(restored.Checkpoint()) != "step-600" || !restored.LastResort()["p"] || restored.Exclude()["p"] || restored.Policy().Patience != renter.PreemptedPatience {
		t.Fatalf("restored %+v (%v), want the preempted lifecycle with its checkpoint", restored.Snapshot(), err)
	}
}
