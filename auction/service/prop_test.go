package service

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Properties, over random services and random histories (replicas lost,
// preempted and back, leases ending and renewed, the count changed):
//
//   - two live replicas (or successors) of a service never share a
//     provider, when there are enough providers for them all;
//   - once the history calms down and placements succeed, the service
//     runs its target count of replicas, each on a provider of its own.
func TestPropertyDistinctProvidersAndTargetReached(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			min := 1 + rng.IntN(4)
			floor := ""
			if f := rng.IntN(min); f > 0 {
				floor = fmt.Sprintf("  floor: {tier: silver, replicas: %d}\n", f)
			}
			spec := parseSpec(t, fmt.Sprintf("  replicas: {min: %d, max: %d}\n", min, min)+floor, "")
			w := newWorld(t, spec, min, Config{HealStep: time.Second})
			// Enough providers for the largest count, each replica with a
			// successor.
			for i := range 2 * 6 {
				w.providers = append(w.providers, fmt.Sprintf("p%02d", i))
			}
			w.auto = true
			if rng.IntN(2) == 0 {
				w.lease = time.Duration(60+rng.IntN(240)) * time.Second
			}
			w.runAll()
			check := func(step int) {
				t.Helper()
				seen := map[string]string{}
				for id, prov := range w.live() {
					if other, ok := seen[prov]; ok {
						t.Fatalf("step %d: %s and %s both on %s (replicas %v, renewing %v)", step, id, other, prov, w.replicas(), w.r.Record().Renewing)
					}
					seen[prov] = id
				}
			}
			for step := range 400 {
				w.now = t0.Add(time.Duration(step) * time.Second)
				members := w.r.Members()
				id := members[rng.IntN(len(members))]
				j := w.jobs[id]
				switch ev := rng.IntN(20); {
				case ev == 0 && j.Phase == Running:
					w.end(id, Failed, "failed", "provider lost")
				case ev == 1 && j.Phase == Running:
					j.Phase, j.State = Holding, "preempting"
					w.jobs[id] = j
					delete(w.ready, id)
				case ev == 2 && j.Phase == Holding:
					j.Phase, j.State = Running, "running"
					w.jobs[id] = j
				case ev == 3 && j.Phase == Running && !j.Lease.End.IsZero() && w.now.After(j.Lease.End):
					w.end(id, Done, "completed", "")
				case ev == 4:
					w.scale = rng.IntN(6)
				}
				w.tick()
				check(step)
				w.readyAll()
			}
			// Calm: nothing fails, leases are long; every placement succeeds.
			w.lease = 0
			for step := 400; step < 500; step++ {
				w.now = t0.Add(time.Duration(step) * time.Second)
				for _, id := range w.r.Members() {
					if j := w.jobs[id]; j.Phase == Holding {
						j.Phase, j.State = Running, "running"
						w.jobs[id] = j
					}
				}
				w.tick()
				check(step)
				w.readyAll()
			}
			want := max(min, spec.Service.Floor.Replicas)
			if w.scale > 0 {
				want = max(w.scale, spec.Service.Floor.Replicas)
			}
			reps := w.replicas()
			if len(reps) != want {
				t.Fatalf("%d replicas, want %d (scale %d, min %d, floor %d)", len(reps), want, w.scale, min, spec.Service.Floor.Replicas)
			}
			for i, id := range reps {
				if j := w.jobs[id]; j.Phase != Running || !w.ready[id] {
					t.Fatalf("replica %d (%s) is %s, ready %v; record %+v", i, id, j.State, w.ready[id], w.r.Record())
				}
			}
			if rec := w.r.Record(); rec.HealError != "" {
				t.Fatalf("healing stopped: %s", rec.HealError)
			}
		})
	}
}
