package service

import (
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// GoldStartLead is how far ahead of its purchase a gold replica (of a
// gold floor or a gold service) bought after the spec's start reserves
// its window from: a replacement, a successor or a service brought up
// late needs time for its auction, whose offers reject a reservation
// whose start has passed (auction.ReasonStartPassed).
const GoldStartLead = 10 * time.Second

// ReplicaSpec is the spec of replica i, bought at now: the floor's
// replicas at the floor's tier and price, a gold replica's start moved
// to now + GoldStartLead once that is past it, and each replica placed
// by its entry of replica_placement, if it has one, within the spec's
// placement; without the spec's gateway section. spec is not changed.
func ReplicaSpec(spec *auction.JobSpec, i int, now time.Time) *auction.JobSpec {
	c := *spec
	svc := *spec.Service
	c.Service = &svc
	if f := spec.Service.Floor; i < f.Replicas {
		// The replica's own spec has the floor's tier and no floor of its
		// own (a floor must be above the spec's tier).
		svc.Floor = auction.Floor{}
		c.Tier = f.Tier
		if f.MaxPrice > 0 {
			c.MaxPrice = f.MaxPrice
		}
	}
	if earliest := now.Add(GoldStartLead); c.Tier == auction.Gold && c.Start.Before(earliest) {
		c.Start = earliest.Truncate(time.Second).Add(time.Second).UTC()
	}
	// The entry narrows the placement the replica's auction filters by
	// (the spec's parse has checked it lies within). The replica's spec
	// keeps no entries: the others' would not lie within its placement,
	// and it is one replica.
	svc.ReplicaPlacement = nil
	// Where the renter's gateway listens is the renter's business: no
	// provider sees it, and it is no part of the replicas' hashes.
	svc.Gateway = auction.ServiceGateway{}
	if i < len(spec.Service.ReplicaPlacement) {
		p := spec.Service.ReplicaPlacement[i]
		if len(p.Regions) > 0 {
			c.Placement.Regions = slices.Clone(p.Regions)
		}
		if p.MaxRTT > 0 {
			c.Placement.MaxRTT = p.MaxRTT
		}
	}
	return &c
}
