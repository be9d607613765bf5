package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
)

func costCredits(v auction.Credits) *auction.Credits { return &v }

func TestJobSpentPrefersTheChargeWithinBound(t *testing.T) {
	for _, c := range []struct {
		name string
		j    JobRecord
		want auction.Credits
	}{
		{"vouchers only", JobRecord{LeaseCID: "L1", Paid: 3_000_000}, 3_000_000},
		{"charged", JobRecord{LeaseCID: "L1", BilledLease: "L1", Paid: 3_000_000, Charged: costCredits(1_250_000)}, 1_250_000},
		{"charge disputed: what was signed", JobRecord{LeaseCID: "L1", BilledLease: "L1", Paid: 3_000_000, Charged: costCredits(9_000_000), ChargeDisputed: true}, 3_000_000},
		{"charge of an earlier lease", JobRecord{LeaseCID: "L2", BilledLease: "L1", Paid: 500_000, Charged: costCredits(1_250_000)}, 500_000},
		{"nothing yet", JobRecord{}, 0},
	} {
		if got := jobSpent(&c.j); got != c.want {
			t.Errorf("%s: spent %d, want %d", c.name, got, c.want)
		}
	}
}

func TestAddCreditsSaturates(t *testing.T) {
	top := auction.Credits(1<<63 - 1)
	if got := addCredits(top-1, 5); got != top {
		t.Errorf("saturating sum %d, want %d", got, top)
	}
	if got := addCredits(7, -3); got != 7 {
		t.Errorf("negative amount counted: %d", got)
	}
}

// costServices is a renter with the given jobs and one service record
// "svc", up since since, whose current replicas are ids; no network.
func costServices(since time.Time, ids []string, jobs ...*JobRecord) *services {
	r := &renterJobs{jobs: map[string]*JobRecord{}, logs: map[string]*jobLog{}}
	for _, j := range jobs {
		r.jobs[j.ID] = j
	}
	n := &Node{renterJobs: r}
	s := &services{n: n, log: slog.New(slog.DiscardHandler), recs: map[string]*ServiceRecord{}, live: map[string]*liveService{}}
	s.recs["svc"] = &ServiceRecord{Name: "svc", Replicas: ids, Created: since}
	n.renterServices = s
	return s
}

func TestServiceSpendCountsReplacedReplicasNotEarlierServices(t *testing.T) {
	up := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := costServices(up, []string{"r0", "r1b"},
		&JobRecord{ID: "r0", Service: "svc", Created: up, LeaseCID: "A", BilledLease: "A", Paid: 2_000_000, Charged: costCredits(1_500_000)},
		&JobRecord{ID: "r1", Service: "svc", Created: up, State: StateFailed, LeaseCID: "B", Paid: 400_000},        // replaced
		&JobRecord{ID: "r1b", Service: "svc", Created: up.Add(time.Minute), LeaseCID: "C", Paid: 100_000},          // its replacement
		&JobRecord{ID: "old", Service: "svc", Created: up.Add(-time.Hour), State: StateCancelled, Paid: 9_000_000}, // an earlier "svc"
		&JobRecord{ID: "other", Service: "other", Created: up, Paid: 7_000_000},
		&JobRecord{ID: "batch", Created: up, Paid: 5_000_000},
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
	j := &JobRecord{ID: "r0", Service: "svc", Created: up, State: StateRunning, LeaseCID: "A"}
	s := costServices(up, []string{"r0"}, j)
	gw := gateway.New(gateway.Config{Service: "svc", Cost: s.serviceCost(s.recs["svc"])})
	defer gw.Close()
	gw.Add(gateway.Replica{ID: "r0", Cost: s.replicaCost("r0")})
	s.live["svc"] = &liveService{gw: gw, url: "http://127.0.0.1:1"}
	v, err := s.view("svc", true)
	if err != nil {
		t.Fatal(err)
	}
	if v.Stats.Spent != 0 || v.Stats.PerKRequests != 0 {
		t.Fatalf("spent before any voucher: %+v", v.Stats.Figures)
	}
	s.n.renterJobs.mu.Lock()
	j.Paid = 2_500_000
	s.n.renterJobs.mu.Unlock()
	v, _ = s.view("svc", true)
	if v.Stats.Spent != 2_500_000 {
		t.Errorf("service spent %d, want 2500000", v.Stats.Spent)
	}
	if len(v.Stats.Replicas) != 1 || v.Stats.Replicas[0].Spent != 2_500_000 {
		t.Errorf("replica figures %+v, want spent 2500000", v.Stats.Replicas)
	}
}
