package renter

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fakeShards plays the node for an Array: the jobs it was told to
// submit, each ended by the test; no clock, no I/O.
type fakeShards struct {
	a      *Array
	jobs   map[string]int // job -> shard
	seen   map[int]ShardSeen
	maxIn  int
	submit []string
	cancel []string
}

func newFake(t *testing.T, a *Array) *fakeShards {
	return &fakeShards{a: a, jobs: map[string]int{}, seen: map[int]ShardSeen{}}
}

func (f *fakeShards) step(providers int) []ArrayAction {
	acts := f.a.Step(f.seen, providers)
	for _, act := range acts {
		switch act.Kind {
		case ActSubmit:
			f.jobs[act.Job] = act.Shard
			f.seen[act.Shard] = ShardSeen{}
			f.submit = append(f.submit, act.Job)
		case ActCancel:
			f.cancel = append(f.cancel, act.Job)
			f.seen[act.Shard] = ShardSeen{Ended: true, Reason: "cancelled"}
		}
	}
	if n := f.a.Progress().InFlight; n > f.maxIn {
		f.maxIn = n
	}
	return acts
}

func (f *fakeShards) end(shard int, o ShardSeen) {
	o.Ended = true
	f.seen[shard] = o
}

func TestArrayRespectsMaxParallelAndCompletes(t *testing.T) {
	a := NewArray("emb-1", 10, 3)
	f := newFake(t, a)
	acts := f.step(0)
	if len(acts) != 3 || acts[0].Job != "emb-1-s0" || acts[2].Shard != 2 {
		t.Fatalf("first step: %+v", acts)
	}
	for round := 0; a.s.State == ArrayRunning; round++ {
		if round > 20 {
			t.Fatal("never completed")
		}
		for i, sh := range a.s.Shards {
			if sh.Phase == ShardInFlight {
				f.end(i, ShardSeen{Completed: true, Provider: "p1"})
				break // one at a time: another starts in its place
			}
		}
		f.step(0)
	}
	if st, _ := a.State(); st != ArrayCompleted || f.maxIn != 3 || len(f.submit) != 10 {
		t.Fatalf("state %s, max in flight %d, submitted %d", st, f.maxIn, len(f.submit))
	}
	if p := a.Progress(); p.Done != 10 {
		t.Fatalf("progress %+v", p)
	}
}

func TestArrayShardRetriedAwayFromItsProvider(t *testing.T) {
	a := NewArray("x", 2, 2)
	f := newFake(t, a)
	f.step(0)
	f.end(0, ShardSeen{Provider: "pA", Reason: "exit code 1"})
	f.end(1, ShardSeen{Completed: true, Provider: "pB"})
	acts := f.step(0)
	if len(acts) != 1 || acts[0].Job != "x-s0-2" || !reflect.DeepEqual(acts[0].Avoid, []string{"pA"}) {
		t.Fatalf("retry: %+v", acts)
	}
	// A different reason elsewhere is not yet the array's failure.
	f.end(0, ShardSeen{Provider: "pB", Reason: "lost the provider"})
	if acts := f.step(0); len(acts) != 1 || acts[0].Job != "x-s0-3" {
		t.Fatalf("third try: %+v", acts)
	}
	f.end(0, ShardSeen{Completed: true, Provider: "pC"})
	f.step(0)
	if st, _ := a.State(); st != ArrayCompleted {
		t.Fatalf("state %s", st)
	}
}

func TestArrayFailsOnSameReasonFromTwoProviders(t *testing.T) {
	a := NewArray("x", 4, 2)
	f := newFake(t, a)
	f.step(0)
	f.end(0, ShardSeen{Provider: "pA", Reason: "exit code 3"})
	f.step(0) // shard 0 again; shard 1 still running
	f.end(0, ShardSeen{Provider: "pB", Reason: "exit code 3"})
	acts := f.step(0)
	st, why := a.State()
	if st != ArrayFailed || !strings.Contains(why, "shard 0 failed the same way on two providers: exit code 3") {
		t.Fatalf("state %s %q", st, why)
	}
	// The shard still running is cancelled; nothing more is submitted.
	if len(acts) != 1 || acts[0].Kind != ActCancel || acts[0].Job != "x-s1" {
		t.Fatalf("acts %+v", acts)
	}
	if acts := f.step(0); len(acts) != 0 {
		t.Fatalf("after failing: %+v", acts)
	}
	if len(f.submit) != 3 {
		t.Fatalf("submitted %v", f.submit)
	}
}

func TestArrayFailsAfterMaxAttempts(t *testing.T) {
	a := NewArray("x", 1, 1)
	f := newFake(t, a)
	f.step(0)
	for n, why := range []string{"a", "b", "c"} {
		f.end(0, ShardSeen{Provider: string(rune('P' + n)), Reason: why})
		f.step(0)
	}
	if st, why := a.State(); st != ArrayFailed || !strings.Contains(why, "failed 3 times; the last: c") {
		t.Fatalf("state %s %q", st, why)
	}
}

func TestArrayNoMatchTwiceFails(t *testing.T) {
	a := NewArray("x", 1, 1)
	f := newFake(t, a)
	f.step(0)
	f.end(0, ShardSeen{NoMatch: true, Reason: "no-match: no offer fits"})
	f.step(0)
	f.end(0, ShardSeen{NoMatch: true, Reason: "no-match: no offer fits"})
	f.step(0)
	if st, _ := a.State(); st != ArrayFailed {
		t.Fatalf("state %s", st)
	}
}

func TestArraySpreadsOverProviders(t *testing.T) {
	a := NewArray("x", 8, 4)
	f := newFake(t, a)
	f.step(2) // two providers known: fair share 2 each
	f.seen[0] = ShardSeen{Provider: "big"}
	f.seen[1] = ShardSeen{Provider: "big"}
	f.end(2, ShardSeen{Completed: true, Provider: "small"})
	acts := f.step(2)
	if len(acts) != 1 || !reflect.DeepEqual(acts[0].Avoid, []string{"big"}) {
		t.Fatalf("acts %+v", acts)
	}
	// Avoiding it matched nothing: the shard goes on without avoiding,
	// and that costs it no failure.
	f.end(4, ShardSeen{NoMatch: true, Reason: "no-match"})
	acts = f.step(2)
	if len(acts) != 1 || acts[0].Shard != 4 || len(acts[0].Avoid) != 0 || len(a.s.Shards[4].Failures) != 0 {
		t.Fatalf("acts %+v shard %+v", acts, a.s.Shards[4])
	}
}

func TestArrayCancel(t *testing.T) {
	a := NewArray("x", 5, 2)
	f := newFake(t, a)
	f.step(0)
	acts := a.Cancel()
	if len(acts) != 2 || acts[0].Job != "x-s0" || acts[1].Job != "x-s1" {
		t.Fatalf("cancel: %+v", acts)
	}
	if st, _ := a.State(); st != ArrayCancelled {
		t.Fatal(st)
	}
	if acts := a.Step(map[int]ShardSeen{}, 0); len(acts) != 0 || a.Cancel() != nil {
		t.Fatalf("after cancel: %+v", acts)
	}
}

// A restarted node resumes from the snapshot: done shards stay done,
// in-flight ones are observed again, and a job recorded as submitted but
// never submitted is submitted again under the same ID.
func TestArrayRestoreFromSnapshot(t *testing.T) {
	a := NewArray("x", 4, 2)
	f := newFake(t, a)
	f.step(0)
	f.end(0, ShardSeen{Completed: true, Provider: "p"})
	f.step(0) // shard 2 submitted
	raw, err := json.Marshal(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var snap ArraySnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	b := RestoreArray(snap)
	// Shard 1 runs on; shard 2's job was never submitted.
	acts := b.Step(map[int]ShardSeen{1: {Provider: "p"}, 2: {Missing: true}}, 0)
	if len(acts) != 1 || acts[0].Job != "x-s2" || acts[0].Shard != 2 {
		t.Fatalf("after restore: %+v", acts)
	}
	if p := b.Progress(); p.Done != 1 || p.InFlight != 2 || p.Pending != 1 {
		t.Fatalf("progress %+v", p)
	}
}

// A shard that finds no match while its siblings run (max_parallel above
// what the market holds at once: the book is full of the array's own
// shards) waits for one of them to end instead of counting a failure,
// however often it happens; it is placed again once one ends, one
// waiting shard per ended sibling. Without siblings in flight, no match
// twice still fails the array.
func TestArrayShardWaitsForAFullBook(t *testing.T) {
	a := NewArray("x", 6, 4)
	f := newFake(t, a)
	f.step(0) // shards 0-3 in flight; two of them found no provider
	for round := 0; round < 3; round++ {
		f.end(2, ShardSeen{NoMatch: true, Reason: "no provider matched the spec"})
		f.end(3, ShardSeen{NoMatch: true, Reason: "no provider matched the spec"})
		if acts := f.step(0); len(acts) != 0 {
			t.Fatalf("round %d: shards placed again while the book is full: %+v", round, acts)
		}
		if st, why := a.State(); st != ArrayRunning {
			t.Fatalf("round %d: the array %s (%s) for a full book", round, st, why)
		}
		if round < 2 {
			// As if their jobs were placed again by an earlier step:
			// here, each waits; put them back in flight to end again.
			for _, i := range []int{2, 3} {
				a.s.Shards[i].Phase, a.s.Shards[i].Waiting = ShardInFlight, false
				f.seen[i] = ShardSeen{}
			}
		}
	}
	if n := len(a.s.Shards[2].Failures); n != 0 {
		t.Fatalf("shard 2 counted %d failures for a full book", n)
	}
	// Shard 0 completes: one waiting shard (the lowest) goes again.
	f.end(0, ShardSeen{Completed: true, Provider: "p"})
	acts := f.step(0)
	if len(acts) != 1 || acts[0].Shard != 2 {
		t.Fatalf("after one sibling's end: %+v, want shard 2 alone", acts)
	}
	// Shard 1 completes: shard 3 goes again.
	f.end(1, ShardSeen{Completed: true, Provider: "p"})
	if acts := f.step(0); len(acts) != 1 || acts[0].Shard != 3 {
		t.Fatalf("after the second sibling's end: %+v, want shard 3", acts)
	}
}
