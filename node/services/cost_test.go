package services

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

func costCredits(v auction.Credits) *auction.Credits { return &v }

// costServices is a renter with the given jobs (and logs, by job ID) and
// one service record "svc", up since since, whose current replicas are
// ids; no network.
func costServices(t testing.TB, since time.Time, ids []string, logs map[string][]byte, jobs ...*renting.JobRecord) *Manager {
	recs := make([]renting.JobRecord, 0, len(jobs))
	for _, j := range jobs {
		recs = append(recs, *j)
	}
	s := &Manager{jobs: heldJobs(t, recs, logs), log: slog.New(slog.DiscardHandler), recs: map[string]*ServiceRecord{}, live: map[string]*liveService{}}
	s.recs["svc"] = &ServiceRecord{Name: "svc", Replicas: ids, Created: since}
	return s
}

// heldJobs is a renter's job manager holding recs and their logs in
// memory (renting.Jobs.Hold), over an empty node.db of its own: no
// market, no network.
func heldJobs(t testing.TB, recs []renting.JobRecord, logs map[string][]byte) *renting.Jobs {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := renting.New(renting.Deps{Bg: t.Context(), Store: st, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.Hold(recs, logs)
	return r
}

func TestServiceSpendCountsReplacedReplicasNotEarlierServices(t *testing.T) {
	up := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := costServices(t, up, []string{"r0", "r1b"}, nil,
		&renting.JobRecord{ID: "r0", Service: "svc", Created: up, LeaseCID: "A", BilledLease: "A", Paid: 2_000_000, Charged: costCredits(1_500_000)},
		&renting.JobRecord{ID: "r1", Service: "svc", Created: up, State: renting.StateFailed, LeaseCID: "B", Paid: 400_000},        // replaced
		&renting.JobRecord{ID: "r1b", Service: "svc", Created: up.Add(time.Minute), LeaseCID: "C", Paid: 100_000},                  // its replacement
		&renting.JobRecord{ID: "old", Service: "svc", Created: up.Add(-time.Hour), State: renting.StateCancelled, Paid: 9_000_000}, // an earlier "svc"
		&renting.JobRecord{ID: "other", Service: "other", Created: up, Paid: 7_000_000},
		&renting.JobRecord{ID: "batch", Created: up, Paid: 5_000_000},
	)
	if got, want := s.serviceCost(s.recs["svc"])(), auction.Credits(1_500_000+400_000+100_000); got != want {
		t.Errorf("service spent %d, want %d", got, want)
	}
	if got := s.replicaCost("r1b")(); got != 100_000 {
		t.Errorf("replica spent %d, want 100000", got)
	}
	if got := s.replicaCost("gone")(); got != 0 {
		t.Errorf("a job not recorded spent %d", got)
	}
}

// The hooks wired into a gateway: its figures show the spend once there
// is one (0 before), for the service and for each replica.
func TestServiceFiguresShowSpend(t *testing.T) {
	up := time.Now().UTC()
	j := &renting.JobRecord{ID: "r0", Service: "svc", Created: up, State: renting.StateRunning, LeaseCID: "A"}
	s := costServices(t, up, []string{"r0"}, nil, j)
	gw := gateway.New(gateway.Config{Service: "svc", Cost: s.serviceCost(s.recs["svc"])})
	defer gw.Close()
	gw.Add(gateway.Replica{ID: "r0", Cost: s.replicaCost("r0")})
	s.live["svc"] = &liveService{gw: gw, url: "http://127.0.0.1:1"}
	v, err := s.View("svc", true)
	if err != nil {
		t.Fatal(err)
	}
	if v.Stats.Spent != 0 || v.Stats.PerKRequests != 0 {
		t.Fatalf("spent before any voucher: %+v", v.Stats.Figures)
	}
	j.Paid = 2_500_000
	s.jobs.Hold([]renting.JobRecord{*j}, nil) // as a voucher's update would
	v, _ = s.View("svc", true)
	if v.Stats.Spent != 2_500_000 {
		t.Errorf("service spent %d, want 2500000", v.Stats.Spent)
	}
	if len(v.Stats.Replicas) != 1 || v.Stats.Replicas[0].Spent != 2_500_000 {
		t.Errorf("replica figures %+v, want spent 2500000", v.Stats.Replicas)
	}
}
