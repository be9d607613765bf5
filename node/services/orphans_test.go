package services

import (
	"slices"
	"testing"

	"github.com/gleaner-net/gleaner/node/renting"
)

func TestServiceOrphansAreTheLiveJobsNoRecordHolds(t *testing.T) {
	recs := map[string]*ServiceRecord{
		"a": {Name: "a", Replicas: []string{"a-1", "a-2"}, Renewing: map[string]string{"a-1": "a-3"}, Retiring: []string{"a-0"}},
		"b": {Name: "b", Replicas: []string{"b-1"}},
	}
	live := []renting.JobRecord{{ID: "a-0"}, {ID: "a-1"}, {ID: "a-2"}, {ID: "a-3"}, {ID: "b-1"},
		{ID: "a-9", Service: "a"}, {ID: "gone-1", Service: "gone"}, {ID: "b-2", Service: "b"}}
	if got, want := serviceOrphans(recs, live), []string{"a-9", "b-2", "gone-1"}; !slices.Equal(got, want) {
		t.Fatalf("orphans %v, want %v", got, want)
	}
	if got := serviceOrphans(nil, live[:1]); !slices.Equal(got, []string{"a-0"}) {
		t.Fatalf("with no service kept, orphans %v, want [a-0]", got)
	}
}
