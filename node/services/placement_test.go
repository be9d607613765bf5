package services

import (
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/service"
)

// Each replica's own spec, which its auction filters providers by:
// replica_placement's entry i narrows replica i's placement (the floor's
// replica first), a replica past the entries keeps the spec's, and every
// replica's spec parses on its own (the other entries are not carried,
// since they would lie outside its narrowed placement).
func TestReplicaSpecAppliesReplicaPlacement(t *testing.T) {
	spec, err := auction.ParseJobSpec([]byte(`name: placed
kind: service
image: gleaner-modelserver:dev
service:
  port: 8000
  readiness: {path: /health}
  replicas: {min: 3, max: 4}
  autoscale: {target_concurrency: 4}
  floor: {tier: silver, replicas: 1, max_price: 2.00}
  replica_placement: [{regions: [eu], max_rtt_ms: 40}, {regions: [na]}, {max_rtt_ms: 20}]
resources: {gpus: 1}
tier: bronze
max_price: 1.00
duration: {max: 1h}
placement: {regions: [eu, na], deny_countries: [RU], max_rtt_ms: 80}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		tier    auction.Tier
		regions []string
		rtt     time.Duration
	}{
		{auction.Silver, []string{"eu"}, 40 * time.Millisecond},
		{auction.Bronze, []string{"na"}, 80 * time.Millisecond},
		{auction.Bronze, []string{"eu", "na"}, 20 * time.Millisecond},
		{auction.Bronze, []string{"eu", "na"}, 80 * time.Millisecond},
	}
	for i, w := range want {
		y, err := replicaSpec(spec, i, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		r, err := auction.ParseJobSpec(y)
		if err != nil {
			t.Fatalf("replica %d's spec does not parse: %v\n%s", i, err, y)
		}
		p := r.Placement
		if r.Tier != w.tier || !slices.Equal(p.Regions, w.regions) || p.MaxRTT != w.rtt || !slices.Equal(p.DenyCountries, []string{"RU"}) {
			t.Errorf("replica %d: tier %s, placement %+v; want %s, regions %v, max_rtt %v, deny [RU]", i, r.Tier, p, w.tier, w.regions, w.rtt)
		}
		if !r.IsService() || len(r.Service.ReplicaPlacement) != 0 {
			t.Errorf("replica %d: service section %+v", i, r.Service)
		}
	}
	// The service's own spec is not changed by it.
	if len(spec.Service.ReplicaPlacement) != 3 || len(spec.Placement.Regions) != 2 {
		t.Fatalf("replicaSpec changed the service's spec: %+v", spec)
	}
}

// A gold floor's replica bought once the spec's start has passed (a
// replacement, a renewal's successor) reserves from service.GoldStartLead after
// it is bought, not from the start every offer would reject as passed;
// one bought before the start keeps it. The spec's start is not changed.
func TestGoldReplicaBoughtAfterTheStartReservesFromNow(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	spec, err := auction.ParseJobSpec([]byte(`name: floor
kind: service
image: srv:1
service:
  port: 8000
  readiness: {path: /health}
  replicas: {min: 2, max: 2}
  floor: {tier: gold, replicas: 1, max_price: 3.00}
resources: {gpus: 1}
tier: bronze
max_price: 1.00
duration: {max: 1h}
start: 2026-12-05T12:00:00Z
`))
	if err != nil {
		t.Fatal(err)
	}
	replica := func(i int, now time.Time) *auction.JobSpec {
		t.Helper()
		y, err := replicaSpec(spec, i, now)
		if err != nil {
			t.Fatal(err)
		}
		r, err := auction.ParseJobSpec(y)
		if err != nil {
			t.Fatalf("replica %d's spec does not parse: %v\n%s", i, err, y)
		}
		return r
	}
	if r := replica(0, start.Add(-time.Hour)); r.Tier != auction.Gold || !r.Start.Equal(start) {
		t.Errorf("bought an hour ahead: tier %s from %v, want gold from %v", r.Tier, r.Start, start)
	}
	late := start.Add(3*time.Hour + 300*time.Millisecond)
	r := replica(0, late)
	if r.Tier != auction.Gold || r.Start.Before(late.Add(service.GoldStartLead)) || r.Start.After(late.Add(service.GoldStartLead+time.Second)) {
		t.Errorf("bought 3 h after the start: from %v, want %v after %v", r.Start, service.GoldStartLead, late)
	}
	if r := replica(1, late); r.Tier != auction.Bronze {
		t.Errorf("the second replica's tier is %s, want bronze", r.Tier)
	}
	if !spec.Start.Equal(start) {
		t.Errorf("replicaSpec moved the service's start to %v", spec.Start)
	}
}
