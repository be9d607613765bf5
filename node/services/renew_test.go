package services

import (
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

// The pending successors and the jobs being retired are in the record the
// store keeps, so a renter restarted mid-renewal finds them; the view
// shows the successor on its replica.
func TestServiceRecordKeepsRenewal(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &ServiceRecord{Name: "kept", Spec: modelService("kept", 1), Replicas: []string{"old"}, Created: time.Now().UTC(),
		Renewing: map[string]string{"old": "new"}, Retiring: []string{"older"}, Renewed: 2}
	if err := st.Update(func(tx *store.Tx) error { return tx.Put(store.BucketServices, rec.Name, rec) }); err != nil {
		t.Fatal(err)
	}
	s, err := New(Deps{Bg: t.Context(), Store: st, Jobs: heldJobs(t, nil, nil), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	got := s.recs["kept"]
	if got == nil || got.Renewing["old"] != "new" || !slices.Equal(got.Retiring, []string{"older"}) || got.Renewed != 2 {
		t.Fatalf("the record read back: %+v", got)
	}
	if succ := successors(got); !slices.Equal(succ, []string{"new"}) {
		t.Fatalf("successors %v", succ)
	}
	v, err := s.View("kept", false)
	if err != nil {
		t.Fatal(err)
	}
	if v.Replicas[0].Renewing != "new" || v.Renewed != 2 {
		t.Fatalf("the view: %+v", v)
	}
}
