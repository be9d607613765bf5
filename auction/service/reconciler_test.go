package service

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A service_scale count adds replicas at the next indices and removes the
// highest ones, cancelling them and their providers' holds.
func TestScaleUpAndDown(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 2, max: 2}\n", ""), 2, Config{})
	w.auto, w.providers = true, []string{"p1", "p2", "p3", "p4", "p5"}
	w.runAll()
	w.tick()
	if p := w.places(); len(p) != 0 {
		t.Fatalf("at the spec's count: %+v", p)
	}
	w.scale = 4
	w.now = w.now.Add(time.Second)
	w.tick()
	p := w.places()
	if len(p) != 2 || p[0].Kind != Add || p[0].Index != 2 || p[1].Index != 3 {
		t.Fatalf("scale 2 → 4: %+v", p)
	}
	if reps := w.replicas(); len(reps) != 4 || reps[2] != "j3" || reps[3] != "j4" {
		t.Fatalf("replicas %v", reps)
	}
	w.scale = 1
	w.now = w.now.Add(time.Second)
	w.tick()
	if reps := w.replicas(); !slices.Equal(reps, []string{"j1"}) {
		t.Fatalf("scale 4 → 1: replicas %v", reps)
	}
	for _, id := range []string{"j2", "j3", "j4"} {
		if _, ok := w.cancels[id]; !ok || !w.released[id] || !w.dropped[id] {
			t.Errorf("%s removed without cancel %v, release %v, drop %v", id, ok, w.released[id], w.dropped[id])
		}
	}
	if _, ok := w.cancels["j1"]; ok || w.released["j1"] {
		t.Error("replica 0 was cancelled")
	}
	if w.saves != 2 {
		t.Errorf("%d saves, want one per change", w.saves)
	}
	// Back to the spec's count.
	w.scale = 0
	w.now = w.now.Add(time.Second)
	w.tick()
	if p := w.places(); len(p) != 1 || p[0].Kind != Add || p[0].Index != 1 {
		t.Fatalf("scale 0 (the spec's 2): %+v", p)
	}
}

// A failed Add ends the Tick's adds: a later index must not take its
// place; the next Tick tries again.
func TestAddFailureStopsTheTick(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 1, max: 1}\n", ""), 1, Config{})
	w.scale, w.failPlace = 3, true
	w.tick()
	if len(w.placed) != 1 || len(w.replicas()) != 1 {
		t.Fatalf("placed %+v, replicas %v", w.placed, w.replicas())
	}
	w.failPlace = false
	w.now = w.now.Add(time.Second)
	w.tick()
	if reps := w.replicas(); len(reps) != 3 {
		t.Fatalf("replicas %v after the store came back", reps)
	}
}

// A replica lost with its provider is replaced at once at its index,
// avoiding that provider; replicas no provider took are replaced with
// back-off, doubling from the heal step.
func TestHealWithBackoff(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 2, max: 2}\n", ""), 2, Config{HealStep: time.Second})
	w.run("j1", "p1")
	w.run("j2", "p2")
	w.readyAll()
	w.tick()
	w.end("j2", Failed, "failed", "provider lost")
	w.now = w.now.Add(time.Second)
	w.tick()
	p := w.places()
	if len(p) != 1 || p[0].Kind != Replace || p[0].Index != 1 || p[0].Old != "j2" || !slices.Equal(p[0].Avoid, []string{"p2"}) {
		t.Fatalf("a lost replica: %+v", p)
	}
	if !slices.Equal(p[0].ExcludedProviders(), []string{"p1"}) {
		t.Errorf("excluded %v, want the live replica's p1", p[0].ExcludedProviders())
	}
	rec := w.r.Record()
	if rec.Replicas[1] != "j3" || rec.Replaced != 1 || rec.Unready != 0 || !strings.Contains(rec.Notes["j3"], "replaces j2 (replica 1): its job ended failed: provider lost") {
		t.Fatalf("record %+v", rec)
	}
	if !w.released["j2"] || !w.dropped["j2"] {
		t.Error("the lost replica still holds its provider or its place in the gateway")
	}

	// No provider takes the replacements: while replica 0 is ready, each
	// waits the first step of the back-off (a ready replica resets the
	// run of no-matches).
	if at := noMatchReplacements(w, 1, 2, 12); !slices.Equal(at, []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second, 10 * time.Second}) {
		t.Fatalf("beside a ready replica: no-match replacements at %v", at)
	}
	if rec := w.r.Record(); rec.HealError != "" || rec.Unready != 0 {
		t.Fatalf("no-matches counted against the spec: %+v", rec)
	}

	// A service none of whose replicas is ready: each waits twice as
	// long as the one before: replaced at once (0 s), then after 2 s,
	// 4 s, 8 s, 16 s, 30 s (HealBackoff of 1..5 with a 1 s step).
	w = newWorld(t, parseSpec(t, "  replicas: {min: 1, max: 1}\n", ""), 1, Config{HealStep: time.Second})
	want := []time.Duration{0, 2 * time.Second, 6 * time.Second, 14 * time.Second, 30 * time.Second, 60 * time.Second, 90 * time.Second}
	if at := noMatchReplacements(w, 0, 0, 100); !slices.Equal(at, want) {
		t.Fatalf("no-match replacements at %v, want %v", at, want)
	}
	// A ready replica ends the run: after the wait in progress, the
	// back-off starts again from its first step.
	w.run(w.replicas()[0], "p3")
	w.readyAll()
	w.now = t0.Add(100 * time.Second)
	w.tick()
	if at := noMatchReplacements(w, 0, 120, 126); !slices.Equal(at, []time.Duration{120 * time.Second, 122 * time.Second}) {
		t.Fatalf("after a ready replica: replaced at %v", at)
	}
}

// noMatchReplacements ends replica i no-match each second from second
// from to second to (since t0), and returns when it was replaced.
func noMatchReplacements(w *world, i, from, to int) []time.Duration {
	var at []time.Duration
	for s := from; s < to; s++ {
		if id := w.replicas()[i]; !w.jobs[id].Phase.Ended() {
			w.end(id, NoMatch, "no-match", "no offer matched")
		}
		w.now = t0.Add(time.Duration(s) * time.Second)
		w.tick()
		if len(w.places()) > 0 {
			at = append(at, time.Duration(s)*time.Second)
		}
	}
	return at
}

// Replicas that end without ever being ready are counted; at HealLimit
// in a row no more are bought and the record says why.
func TestHealStopsAfterUnreadyReplicas(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 1, max: 1}\n", ""), 1, Config{HealStep: time.Second})
	var bought int
	for s := range 200 {
		id := w.replicas()[0]
		if j := w.jobs[id]; j.Phase == Pending {
			w.run(id, "p1")
		} else if j.Phase == Running {
			w.end(id, Failed, "failed", "exit 1")
		}
		w.now = t0.Add(time.Duration(s) * time.Second)
		w.tick()
		bought += len(w.places())
	}
	rec := w.r.Record()
	if bought != HealLimit-1 || rec.Unready != HealLimit || !strings.Contains(rec.HealError, "4 replicas in a row ended without passing their readiness check") {
		t.Fatalf("%d bought; record %+v", bought, rec)
	}
}

// A replica that runs but is never ready is given up (cancelled) after
// readiness.initial_delay plus the grace, then replaced with the reason.
func TestGiveUpUnready(t *testing.T) {
	spec := parseSpec(t, "  replicas: {min: 1, max: 1}\n", "")
	spec.Service.Readiness.InitialDelay = 5 * time.Second
	w := newWorld(t, spec, 1, Config{ReadyGrace: 10 * time.Second})
	w.run("j1", "p1")
	w.now = t0.Add(14 * time.Second)
	w.tick()
	if _, ok := w.cancels["j1"]; ok {
		t.Fatal("given up before initial_delay + grace")
	}
	w.now = t0.Add(15 * time.Second)
	w.tick()
	if _, ok := w.cancels["j1"]; !ok {
		t.Fatal("not given up at initial_delay + grace")
	}
	w.now = w.now.Add(time.Second)
	w.tick()
	p := w.places()
	if len(p) != 1 || p[0].Old != "j1" || !strings.HasPrefix(p[0].Why, "cancelled: not ready 15s after it started") || !strings.Contains(p[0].Why, "GET /health on port 8000") {
		t.Fatalf("the replacement: %+v", p)
	}
	if w.r.Record().Unready != 1 {
		t.Errorf("unready %d", w.r.Record().Unready)
	}
}

// A floor of one silver replica under a bronze service: the bronze ones
// preempted are left to their own re-auction; ended, they are replaced
// at their index, bronze; the floor replica stays silver; neither a
// scale-down nor a count below the floor takes it.
func TestFloorHeldUnderBronzePreemption(t *testing.T) {
	spec := parseSpec(t, "  replicas: {min: 3, max: 3}\n  floor: {tier: silver, replicas: 1, max_price: 2.00}\n", "")
	w := newWorld(t, spec, 3, Config{})
	for i, id := range w.replicas() {
		want := auction.Bronze
		if i == 0 {
			want = auction.Silver
		}
		if tier := w.specs[id].Spec.Tier; tier != want {
			t.Fatalf("replica %d's spec is %s, want %s", i, tier, want)
		}
		w.run(id, []string{"p1", "p2", "p3"}[i])
	}
	w.readyAll()
	w.tick()
	// The owner reclaims the bronze replicas' GPUs.
	for _, id := range []string{"j2", "j3"} {
		j := w.jobs[id]
		j.Phase, j.State = Holding, "preempting"
		w.jobs[id] = j
		delete(w.ready, id)
	}
	w.now = w.now.Add(time.Second)
	if acts := w.tick(); len(w.places()) != 0 || len(w.cancels) != 0 {
		t.Fatalf("acted on preempting replicas: %+v", acts)
	}
	for _, id := range []string{"j2", "j3"} {
		w.end(id, Failed, "failed", "preempted, no re-auctions left")
	}
	w.now = w.now.Add(time.Second)
	w.tick()
	p := w.places()
	if len(p) != 2 || p[0].Index != 1 || p[1].Index != 2 || p[0].Spec.Tier != auction.Bronze || p[1].Spec.Tier != auction.Bronze {
		t.Fatalf("replacements: %+v", p)
	}
	if reps := w.replicas(); reps[0] != "j1" {
		t.Fatalf("the floor replica was replaced: %v", reps)
	}
	// The floor replica itself lost: its replacement is silver.
	w.end("j1", Failed, "failed", "provider lost")
	w.now = w.now.Add(time.Second)
	w.tick()
	if p := w.places(); len(p) != 1 || p[0].Index != 0 || p[0].Spec.Tier != auction.Silver || p[0].Spec.MaxPrice != 2_000_000 {
		t.Fatalf("the floor replica's replacement: %+v", p)
	}
	// Scaled to 1 then 0 (the spec's): the floor's index stays.
	w.scale = 1
	w.now = w.now.Add(time.Second)
	w.tick()
	if reps := w.replicas(); len(reps) != 1 || w.specs[reps[0]].Spec.Tier != auction.Silver {
		t.Fatalf("scaled to 1: %v", reps)
	}
}

// A service whose count goes below its floor keeps the floor.
func TestTargetNeverBelowTheFloor(t *testing.T) {
	spec := parseSpec(t, "  replicas: {min: 3, max: 3}\n  floor: {tier: silver, replicas: 2}\n", "")
	w := newWorld(t, spec, 3, Config{})
	w.scale = 1
	w.tick()
	if reps := w.replicas(); len(reps) != 2 {
		t.Fatalf("replicas %v, want the floor's 2", reps)
	}
}

// Make before break: a successor is bought within the renewal margin of
// the lease's end, on a provider none of the live replicas (the old one
// included) holds; it takes the index once ready, and the old replica is
// retired, not dropped.
func TestRenewMakeBeforeBreak(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 2, max: 2}\n", ""), 2, Config{})
	w.lease = 10 * time.Minute // margin: RenewAllowance, 60 s
	w.run("j1", "p1")
	w.run("j2", "p2")
	w.readyAll()
	w.now = t0.Add(9*time.Minute - time.Second)
	if w.tick(); len(w.places()) != 0 {
		t.Fatalf("renewed before the margin: %+v", w.places())
	}
	w.now = t0.Add(9 * time.Minute)
	w.tick()
	p := w.places()
	if len(p) != 2 || p[0].Kind != Renew || p[0].Old != "j1" || !slices.Equal(p[0].ExcludedProviders(), []string{"p1", "p2"}) {
		t.Fatalf("renewals: %+v", p)
	}
	rec := w.r.Record()
	if rec.Renewing["j1"] != "j3" || rec.Renewing["j2"] != "j4" || !slices.Equal(w.r.Members(), []string{"j1", "j2", "j3", "j4"}) {
		t.Fatalf("record %+v", rec)
	}
	// Bought once per lease.
	w.now = w.now.Add(time.Second)
	if w.tick(); len(w.places()) != 0 {
		t.Fatalf("bought again: %+v", w.places())
	}
	w.run("j3", "p3")
	w.run("j4", "p4")
	w.now = w.now.Add(time.Second)
	w.tick()
	if reps := w.replicas(); reps[0] != "j1" {
		t.Fatal("a successor not yet ready took over")
	}
	w.ready["j3"] = true
	w.now = w.now.Add(time.Second)
	w.tick()
	rec = w.r.Record()
	if !slices.Equal(rec.Replicas, []string{"j3", "j2"}) || rec.Renewed != 1 || !slices.Equal(w.retired, []string{"j1"}) || w.dropped["j1"] || !w.released["j1"] {
		t.Fatalf("after the handover: %+v, retired %v", rec, w.retired)
	}
	if !strings.Contains(rec.Notes["j3"], "renews j1 (replica 0): ready before the lease's end") {
		t.Errorf("note %q", rec.Notes["j3"])
	}
}

// The handover's cases, as the node's TestRenewSettle had them.
func TestRenewSettle(t *testing.T) {
	for _, c := range []struct {
		what         string
		old, succ    Phase
		ready        bool     // the successor, in the gateway
		job          string   // at the index after
		retire, drop []string // retired, dropped
		renewing     bool     // still after
		renewed      int
	}{
		{"a ready successor takes over", Running, Running, true, "new", []string{"old"}, nil, false, 1},
		{"a loading successor waits", Running, Running, false, "old", nil, nil, true, 0},
		{"a failed successor is dropped", Running, Failed, false, "old", nil, []string{"new"}, false, 0},
		{"the old lease ended first", Done, Pending, false, "new", nil, []string{"old"}, false, 1},
		{"both ended: healing's turn", Done, NoMatch, false, "old", nil, []string{"new"}, false, 0},
	} {
		spec := parseSpec(t, "  replicas: {min: 1, max: 1}\n", "")
		r := New("svc", spec, Record{Replicas: []string{"old"}, Renewing: map[string]string{"old": "new"}}, Config{})
		o := Observed{Jobs: map[string]Job{"old": {Phase: c.old, Provider: "p1"}, "new": {Phase: c.succ, Provider: "p2"}}}
		if c.ready {
			o.Gateway = []Replica{{ID: "new", Ready: true}}
		}
		var retire, drop []string
		acts := []Action{}
		r.settle(o, map[string]bool{"new": c.ready}, &acts)
		for _, a := range acts {
			switch a := a.(type) {
			case Retire:
				retire = append(retire, a.Job)
			case Drop:
				drop = append(drop, a.Job)
			}
		}
		rec := r.Record()
		if rec.Replicas[0] != c.job || !slices.Equal(retire, c.retire) || !slices.Equal(drop, c.drop) ||
			(rec.Renewing["old"] != "") != c.renewing || rec.Renewed != c.renewed {
			t.Errorf("%s: replica %s, retire %v, drop %v, renewing %v, renewed %d", c.what, rec.Replicas[0], retire, drop, rec.Renewing, rec.Renewed)
		}
		if c.job == "new" && !strings.Contains(rec.Notes["new"], "renews old (replica 0)") {
			t.Errorf("%s: note %q", c.what, rec.Notes["new"])
		}
	}
}

// Removing a replica that has a successor removes the successor too.
func TestScaleDownTakesTheSuccessor(t *testing.T) {
	spec := parseSpec(t, "  replicas: {min: 2, max: 2}\n", "")
	w := newWorld(t, spec, 2, Config{})
	w.r = New("svc", spec, Record{Replicas: []string{"j1", "j2"}, Renewing: map[string]string{"j2": "j9"}}, Config{})
	w.jobs["j9"] = Job{Phase: Pending}
	w.scale = 1
	w.tick()
	if rec := w.r.Record(); !slices.Equal(rec.Replicas, []string{"j1"}) || rec.Renewing != nil {
		t.Fatalf("record %+v", rec)
	}
	if _, ok := w.cancels["j9"]; !ok || !w.released["j9"] {
		t.Fatal("the successor was left to run")
	}
}

// Autoscaling (autoscale.go) drives the count: over the target for
// scale_up_after adds a replica; a pending successor neither holds it nor
// counts as ready.
func TestAutoscaleDrivesTheCount(t *testing.T) {
	spec := parseSpec(t, "  replicas: {min: 1, max: 3}\n  autoscale: {target_qps_per_replica: 3, scale_up_after: 10s, scale_down_after: 30s}\n", "")
	w := newWorld(t, spec, 1, Config{})
	w.auto, w.providers = true, []string{"p1", "p2", "p3"}
	w.runAll()
	w.readyAll()
	w.qps = 7.5
	var added time.Duration
	for s := range 30 {
		w.now = t0.Add(time.Duration(s) * time.Second)
		w.tick()
		if len(w.places()) > 0 && added == 0 {
			added = time.Duration(s) * time.Second
			if p := w.places(); p[0].Kind != Add || p[0].Index != 1 {
				t.Fatalf("autoscale: %+v", p)
			}
		}
		w.readyAll()
	}
	if added != 10*time.Second {
		t.Fatalf("added at %v, want after scale_up_after 10s", added)
	}
	if n := len(w.replicas()); n != 3 {
		t.Fatalf("%d replicas at qps 7.5 over 3 per replica, want 3", n)
	}
	// The load gone: one removed per scale_down_after (the window starts
	// again with the sample after a change).
	w.qps = 0
	var removed []time.Duration
	for s := 30; s < 120; s++ {
		w.now = t0.Add(time.Duration(s) * time.Second)
		before := len(w.replicas())
		w.tick()
		if len(w.replicas()) < before {
			removed = append(removed, time.Duration(s)*time.Second)
		}
	}
	if !slices.Equal(removed, []time.Duration{60 * time.Second, 91 * time.Second}) {
		t.Fatalf("removed at %v", removed)
	}
	// A pending successor is not a replica not yet ready.
	r := New("svc", spec, Record{Replicas: []string{"a"}, Renewing: map[string]string{"a": "b"}}, Config{})
	o := Observed{QPS: 2, Gateway: []Replica{{ID: "a", Ready: true}, {ID: "b", Ready: false}}}
	if l := r.load(o); l.Ready != 1 {
		t.Fatalf("load %+v", l)
	}
}

// NotPlaced: once every index's attempt ended unplaced, the latest why;
// cleared once one is placed.
func TestNotPlaced(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 2, max: 2}\n", ""), 2, Config{})
	w.end("j1", NoMatch, "no-match", "no offer: workload")
	w.tick()
	if np := w.r.Record().NotPlaced; np != "" {
		t.Fatalf("not placed with replica 1 still on its way: %q", np)
	}
	w.now = w.now.Add(time.Second)
	w.end("j2", Failed, "failed", "image not found")
	w.tick()
	if np := w.r.Record().NotPlaced; np != "replica 1 (job j2) ended failed: image not found" {
		t.Fatalf("not placed %q", np)
	}
	for _, id := range w.replicas() {
		if w.jobs[id].Phase == Pending {
			w.run(id, "p1")
			break
		}
	}
	w.now = w.now.Add(time.Second)
	w.tick()
	if np := w.r.Record().NotPlaced; np != "" {
		t.Fatalf("still not placed once one is: %q", np)
	}
}

// Replacements under back-off go one at a time: the others wait for the
// first one's back-off.
func TestBackoffHoldsTheOtherReplacements(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 3, max: 3}\n", ""), 3, Config{HealStep: time.Second})
	for _, id := range w.replicas() {
		w.end(id, NoMatch, "no-match", "none")
	}
	w.tick()
	if p := w.places(); len(p) != 1 || p[0].Index != 0 {
		t.Fatalf("three no-matches at once: %+v", p)
	}
	w.now = w.now.Add(time.Second)
	if w.tick(); len(w.places()) != 0 {
		t.Fatalf("within the back-off: %+v", w.places())
	}
	w.now = w.now.Add(time.Second)
	if w.tick(); len(w.places()) != 1 || w.places()[0].Index != 1 {
		t.Fatalf("after the back-off: %+v", w.places())
	}
}

// A replica that ended at an index the count no longer reaches is
// removed, not replaced and then removed.
func TestScaleDownDoesNotHealRemovedReplicas(t *testing.T) {
	w := newWorld(t, parseSpec(t, "  replicas: {min: 3, max: 3}\n", ""), 3, Config{})
	w.providers = []string{"p1", "p2", "p3"}
	w.runAll()
	w.readyAll()
	w.tick()
	w.end("j3", Failed, "failed", "provider lost")
	w.scale = 2
	w.now = w.now.Add(time.Second)
	w.tick()
	if p := w.places(); len(p) != 0 {
		t.Fatalf("replaced a replica being removed: %+v", p)
	}
	if reps := w.replicas(); !slices.Equal(reps, []string{"j1", "j2"}) {
		t.Fatalf("replicas %v", reps)
	}
}
