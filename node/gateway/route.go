package gateway

import (
	"math/rand/v2"
	"time"
)

// Route is a routing policy; see Config.Route.
type Route int

const (
	RouteScore  Route = iota // lowest (outstanding+1) × RTT
	RouteRandom              // uniformly among the ready replicas
)

// The routing score of a ready replica is
//
//	(outstanding + 1) × max(rtt, RTTFloor)
//
// in microseconds: the expected wait if requests queue behind the ones in
// flight and each costs about one round trip. The lowest score wins; ties
// go to the replica with fewer outstanding requests, then to the one
// picked less often (so that idle equal replicas share serial traffic),
// then to the lower ID. The floor keeps a replica on the same machine
// (RTT near 0) from taking everything however loaded it is.
func (g *Gateway) score(r *replica) int64 {
	rtt := time.Duration(r.rtt.Load())
	if rtt < g.cfg.RTTFloor {
		rtt = g.cfg.RTTFloor
	}
	return (r.outstanding.Load() + 1) * max(rtt.Microseconds(), 1)
}

// pick returns the ready replica with the lowest score that is not in
// tried, counted as outstanding, or nil when there is none.
func (g *Gateway) pick(tried []*replica) *replica {
	if g.cfg.Route == RouteRandom {
		return g.pickRandom(tried)
	}
	var best *replica
	var bestScore int64
	for _, r := range g.snapshot() {
		if !r.ready.Load() || contains(tried, r) {
			continue
		}
		s := g.score(r)
		if best == nil || s < bestScore || s == bestScore && better(r, best) {
			best, bestScore = r, s
		}
	}
	if best != nil {
		best.outstanding.Add(1)
		best.picked.Add(1)
	}
	return best
}

// better breaks a tie between equal scores; replicas come sorted by ID.
func better(a, b *replica) bool {
	if ao, bo := a.outstanding.Load(), b.outstanding.Load(); ao != bo {
		return ao < bo
	}
	return a.picked.Load() < b.picked.Load()
}

func contains(rs []*replica, r *replica) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// pickRandom is pick under RouteRandom: one of the ready replicas not in
// tried, each as likely (reservoir sampling over the set).
func (g *Gateway) pickRandom(tried []*replica) *replica {
	var chosen *replica
	n := 0
	for _, r := range g.snapshot() {
		if !r.ready.Load() || contains(tried, r) {
			continue
		}
		n++
		if rand.IntN(n) == 0 {
			chosen = r
		}
	}
	if chosen != nil {
		chosen.outstanding.Add(1)
		chosen.picked.Add(1)
	}
	return chosen
}
