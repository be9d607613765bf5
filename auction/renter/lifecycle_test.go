package renter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

func lifeSpec(reauctions int) *auction.JobSpec {
	s := testSpec()
	s.Retry.MaxReauctions = reauctions
	return s
}

// Every kind of end, one after another, as table rows: what each decides,
// whom it leaves out, and what it spends.
func TestLifecycleDecidesEachEnd(t *testing.T) {
	noMatch := &NoMatchError{Considered: 0, Excluded: 1}
	type row struct {
		name     string
		reauct   int
		ends     []RunEnd
		unplaced bool // then Place fails with noMatch
		done     bool
		outcome  Outcome
		why      string // a substring of the last step's Why
		excluded []string
		kept     []string // never excluded
		patience time.Duration
	}
	rows := []row{
		{name: "completed", ends: []RunEnd{{End: EndCompleted, Provider: "a"}}, done: true, outcome: OutcomeCompleted},
		{name: "failed", ends: []RunEnd{{End: EndFailed, Provider: "a", Why: "the job exited with code 3"}}, done: true, outcome: OutcomeFailed, why: "code 3"},
		{name: "cancelled", ends: []RunEnd{{End: EndCancelled, Provider: "a"}}, done: true, outcome: OutcomeCancelled},
		{name: "preempted with no re-auctions goes on, the provider kept", ends: []RunEnd{{End: EndPreempted, Provider: "a", Why: "preempted: a gold reservation", Checkpoint: []byte("c1")}},
			why: "from its checkpoint", kept: []string{"a"}, patience: PreemptedPatience},
		{name: "preempted, then no GPU came free", ends: []RunEnd{{End: EndPreempted, Provider: "a", Why: "preempted: silver"}}, unplaced: true,
			done: true, outcome: OutcomeNoMatch, why: "preempted 1 times", kept: []string{"a"}},
		{name: "lost with none left fails", ends: []RunEnd{{End: EndLost, Provider: "a", Why: "lost the provider"}},
			done: true, outcome: OutcomeFailed, why: "no re-auctions left of 0", excluded: []string{"a"}},
		{name: "lost with one left goes on without it", reauct: 1, ends: []RunEnd{{End: EndLost, Provider: "a", Why: "lost the provider"}},
			why: "auctioning again", excluded: []string{"a"}, patience: DefaultPatience},
		{name: "retry exit spends", reauct: 1, ends: []RunEnd{{End: EndRetryExit, Provider: "a", Why: "exit code 75 asks for a retry"}, {End: EndRetryExit, Provider: "b", Why: "exit code 75 asks for a retry"}},
			done: true, outcome: OutcomeFailed, why: "no re-auctions left of 1", excluded: []string{"a", "b"}},
		{name: "a failed pull and no other provider fails naming the image", ends: []RunEnd{{End: EndNotStarted, Cause: StartPull, Provider: "a", Why: "provider: the image could not be pulled: not found"}},
			unplaced: true, done: true, outcome: OutcomeFailed, why: `1 provider could not pull the image "registry.example/team/train:1.4"`, excluded: []string{"a"}},
		{name: "two failed pulls fail", reauct: 5, ends: []RunEnd{{End: EndNotStarted, Cause: StartPull, Provider: "a"}, {End: EndNotStarted, Cause: StartPull, Provider: "b", Why: "provider: the image could not be pulled: denied"}},
			done: true, outcome: OutcomeFailed, why: `2 providers could not pull the image`, excluded: []string{"a", "b"}},
		{name: "two input failures fail", ends: []RunEnd{{End: EndNotStarted, Cause: StartInputs, Provider: "a"}, {End: EndNotStarted, Cause: StartInputs, Provider: "b"}},
			done: true, outcome: OutcomeFailed, why: "could not fetch the job's inputs", excluded: []string{"a", "b"}},
		{name: "two inputs refusals fail saying so", ends: []RunEnd{{End: EndNotStarted, Cause: StartInputs, Provider: "a"},
			{End: EndNotStarted, Cause: StartInputs, Provider: "b", Why: "provider: the job's inputs could not be fetched: inputs[0] bafy: refused: over this provider's limit"}},
			done: true, outcome: OutcomeFailed, why: "2 providers refused the job's inputs", excluded: []string{"a", "b"}},
		{name: "three failed starts fail", ends: []RunEnd{{End: EndNotStarted, Provider: "a"}, {End: EndNotStarted, Provider: "b"}, {End: EndNotStarted, Provider: "c"}},
			done: true, outcome: OutcomeFailed, why: "3 providers could not start the job", excluded: []string{"a", "b", "c"}},
		{name: "displaced blames nobody", ends: []RunEnd{{End: EndNotStarted, Cause: StartDisplaced, Provider: "a", Why: "displaced"}},
			why: "no re-auction spent", kept: []string{"a"}, patience: DefaultPatience},
		{name: "taken back blames nobody", ends: []RunEnd{{End: EndNotStarted, Cause: StartTakenBack, Provider: "a", Why: "taken back"}},
			why: "no re-auction spent", kept: []string{"a"}, patience: DefaultPatience},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			l := NewLifecycle(lifeSpec(r.reauct), "")
			l.Placed(Result{})
			var st Step
			for i, e := range r.ends {
				st = l.Ended(e)
				if st.Done && i < len(r.ends)-1 {
					t.Fatalf("done after end %d of %d: %+v", i+1, len(r.ends), st)
				}
				if !st.Done {
					l.Placed(Result{Attempt: l.Policy().Attempt})
				}
			}
			if r.unplaced {
				st = l.Unplaced(Result{Attempt: l.Policy().Attempt}, noMatch)
			}
			if st.Done != r.done || st.Done && st.Outcome != r.outcome || !strings.Contains(st.Why, r.why) {
				t.Fatalf("step %+v, want done %v outcome %v with %q", st, r.done, r.outcome, r.why)
			}
			for _, p := range r.excluded {
				if !l.Exclude()[p] {
					t.Errorf("%s not excluded: %v", p, l.Left())
				}
			}
			for _, p := range r.kept {
				if l.Exclude()[p] {
					t.Errorf("%s excluded, want it kept: %v", p, l.Left())
				}
			}
			if !st.Done {
				if got := l.Policy().Patience; got != r.patience {
					t.Errorf("next placement's patience %v, want %v", got, r.patience)
				}
			}
		})
	}
}

// The spec's max_reauctions are spent by losses and retryable exits only:
// a preemption, however often, spends none, and a failed pull makes the
// next placement spend none either (it tries another provider at once).
func TestLifecycleSpendsOnlyOnFailures(t *testing.T) {
	l := NewLifecycle(lifeSpec(2), "")
	l.Placed(Result{})
	for range 5 {
		if st := l.Ended(RunEnd{End: EndPreempted, Provider: "a"}); st.Done {
			t.Fatalf("a preemption ended the job: %+v", st)
		}
		l.Placed(Result{Attempt: l.Policy().Attempt})
	}
	if p := l.Policy(); p.Attempt != 0 {
		t.Fatalf("5 preemptions spent %d re-auctions, want none", p.Attempt)
	}
	l.Ended(RunEnd{End: EndLost, Provider: "b"})
	if p := l.Policy(); p.Attempt != 1 || p.MaxReauctions != 2 {
		t.Fatalf("after a loss: %+v, want 1 of 2 spent", p)
	}
	l.Placed(Result{Attempt: 1})
	l.Ended(RunEnd{End: EndNotStarted, Cause: StartPull, Provider: "c"})
	if p := l.Policy(); p.MaxReauctions != p.Attempt || p.Patience != 0 {
		t.Fatalf("after a failed pull: %+v, want no re-auction to spend and no patience", p)
	}
	if l.Leases() != 7 {
		t.Errorf("%d leases counted, want 7", l.Leases())
	}
}

// Properties over random sequences of ends: a preemption never excludes
// its provider, the checkpoint is always the latest shipped, and every
// sequence ends with a typed outcome within the bounds.
func TestLifecycleProperties(t *testing.T) {
	ends := []End{EndPreempted, EndLost, EndRetryExit, EndNotStarted, EndCompleted, EndFailed}
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 7))
		l := NewLifecycle(lifeSpec(rng.IntN(4)), "")
		l.Placed(Result{})
		var latest []byte
		preemptedOnly := map[string]bool{}
		blamed := map[string]bool{}
		var st Step
		for n := 0; ; n++ {
			if n > MaxPreemptions+100 {
				t.Fatalf("seed %d: no outcome after %d runs", seed, n)
			}
			e := RunEnd{End: ends[rng.IntN(len(ends))], Cause: StartCause(rng.IntN(5)), Provider: string(rune('a' + rng.IntN(6)))}
			if e.End == EndPreempted && rng.IntN(2) == 0 {
				e.Checkpoint = []byte{byte(n)}
				latest = e.Checkpoint
			}
			switch {
			case e.End == EndPreempted || e.End == EndNotStarted && (e.Cause == StartDisplaced || e.Cause == StartTakenBack):
				if !blamed[e.Provider] {
					preemptedOnly[e.Provider] = true
				}
			case e.End != EndCompleted && e.End != EndFailed:
				blamed[e.Provider] = true
				delete(preemptedOnly, e.Provider)
			}
			st = l.Ended(e)
			if string(l.Checkpoint()) != string(latest) {
				t.Fatalf("seed %d: checkpoint %v, want the latest %v", seed, l.Checkpoint(), latest)
			}
			for p := range preemptedOnly {
				if l.Exclude()[p] {
					t.Fatalf("seed %d: %s excluded though it only preempted the job", seed, p)
				}
			}
			if st.Done {
				break
			}
			l.Placed(Result{Attempt: l.Policy().Attempt})
		}
		if st.Outcome < OutcomeCompleted || st.Outcome > OutcomeCancelled {
			t.Fatalf("seed %d: untyped outcome %v", seed, st.Outcome)
		}
	}
}

// release frees the GPUs and the lease a fake provider holds for jobID, as
// a provider does once a preempted job's lease is settled.
func (p *fakeProvider) release(jobID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for h, j := range p.used {
		if j == jobID {
			delete(p.used, h)
		}
	}
	delete(p.leases, jobID)
}

// A preempted bronze job, in virtual time, over fake providers: its only
// provider preempts it for a better claim and is busy for 40 s; the job
// waits, spending nothing, and goes back to that same provider once it is
// free, resuming from the checkpoint the preempted run shipped back.
func TestLifecyclePreemptedJobComesBackToTheSameProvider(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 1, 1_000_000)
	p := m.providers[0]
	a := m.auctioneer(t)
	spec := lifeSpec(0)
	life := NewLifecycle(spec, "")
	req := request(t, "job-1", spec)
	req.Exclude = life.Exclude()
	var second Result
	var err error
	steps := drive(t, clock, func() {
		first, err := a.Place(context.Background(), req, life.Policy())
		if err != nil {
			t.Errorf("first placement: %v", err)
			return
		}
		life.Placed(first)
		// The provider takes the GPU back for a silver job for 40 s.
		p.release("job-1")
		p.decline = auction.ReasonBusy
		if st := life.Ended(RunEnd{End: EndPreempted, Provider: p.id, Why: "preempted: a silver job", Checkpoint: []byte("step-900")}); st.Done {
			t.Errorf("the preemption ended the job: %+v", st)
			return
		}
		pol := life.Policy()
		pol.Progress = func(pr Progress) {
			if pr.Waited >= 40*time.Second {
				p.decline = ""
			}
		}
		second, err = a.Place(context.Background(), req, pol)
	})
	if err != nil {
		t.Fatalf("the preempted job was not placed again: %v", err)
	}
	life.Placed(second)
	if second.Lease.Provider != p.id || string(life.Checkpoint()) != "step-900" || life.Leases() != 2 {
		t.Fatalf("placed on %s with checkpoint %q after %d leases; want the provider that preempted it, step-900, 2",
			second.Lease.Provider, life.Checkpoint(), life.Leases())
	}
	var waited time.Duration
	for _, s := range steps {
		waited += s
	}
	if waited < 40*time.Second || waited > time.Minute+10*time.Second {
		t.Errorf("waited %v in all, want just past the 40 s the provider was busy", waited)
	}
}

// A failed pull on the only provider ends the job failed at once, naming
// the image: no minute of waiting for offers that cannot help.
func TestLifecycleFailedPullEndsAtOnce(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 1, 1_000_000)
	a := m.auctioneer(t)
	spec := lifeSpec(3)
	life := NewLifecycle(spec, "")
	req := request(t, "job-1", spec)
	req.Exclude = life.Exclude()
	var st Step
	steps := drive(t, clock, func() {
		res, err := a.Place(context.Background(), req, life.Policy())
		if err != nil {
			t.Errorf("first placement: %v", err)
			return
		}
		life.Placed(res)
		m.providers[0].release("job-1")
		life.Ended(RunEnd{End: EndNotStarted, Cause: StartPull, Provider: m.providers[0].id, Why: "provider: the image could not be pulled: manifest unknown"})
		res, err = a.Place(context.Background(), req, life.Policy())
		if err == nil {
			t.Errorf("placed again on the provider that could not pull: %+v", res.Lease)
			return
		}
		st = life.Unplaced(res, err)
	})
	if len(steps) != 0 {
		t.Errorf("waited %v before failing, want no wait", steps)
	}
	if !st.Done || st.Outcome != OutcomeFailed || !strings.Contains(st.Why, `could not pull the image "`+spec.Image+`"`) ||
		!strings.Contains(st.Why, "manifest unknown") {
		t.Fatalf("step %+v, want failed naming the image and the registry's answer", st)
	}
	if !strings.Contains(st.Why, "besides the 1 this job left") {
		t.Errorf("the message does not count the provider the job left: %s", st.Why)
	}
}

// A provider that preempted the job is asked, but awarded only after
// every other bidder: here the cheaper one, which preempted it, wins only
// once the other refuses.
func TestAPreemptorIsAwardedOnlyAsALastResort(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 8, 1_000_000, 1_200_000)
	cheap, dear := m.providers[0], m.providers[1]
	a := m.auctioneer(t)
	life := NewLifecycle(lifeSpec(0), "")
	life.Placed(Result{})
	life.Ended(RunEnd{End: EndPreempted, Provider: cheap.id, Why: "preempted: a gold reservation"})
	req := request(t, "job-1", lifeSpec(0))
	req.Exclude, req.LastResort = life.Exclude(), life.LastResort()
	res, err := a.Auction(context.Background(), req)
	if err != nil || res.Lease.Provider != dear.id {
		t.Fatalf("leased %v (%v), want the provider that did not preempt the job", res.Lease, err)
	}
	dear.release("job-1")
	dear.refuse = "fully utilised"
	res, err = a.Auction(context.Background(), request(t, "job-2", lifeSpec(0)))
	if err != nil || res.Lease.Provider != cheap.id {
		t.Fatalf("job-2 leased %v (%v), want the cheaper provider", res.Lease, err)
	}
	req.JobID = "job-3"
	req.SpecYAML = request(t, "job-3", lifeSpec(0)).SpecYAML
	if res, err = a.Auction(context.Background(), req); err != nil || res.Lease.Provider != cheap.id {
		t.Fatalf("with the other refusing, leased %v (%v), want the preemptor as the last resort", res.Lease, err)
	}
}

// A replica's successor avoids the provider lost with its predecessor,
// but may go back to it when nothing else bids (a provider restarted).
func TestAnAvoidedProviderIsALastResort(t *testing.T) {
	l := NewLifecycle(lifeSpec(0), "")
	l.Avoid("lost", "its service replica was lost with it")
	if l.Exclude()["lost"] || !l.LastResort()["lost"] || l.Left()["lost"] == "" {
		t.Fatalf("exclude %v, last resort %v, left %v: want a last resort with its why", l.Exclude(), l.LastResort(), l.Left())
	}
}

// A lifecycle rebuilt from its snapshot, through JSON as node's store
// keeps it, and its checkpoint decides every later end as the original
// does: a restarted renter spends no re-auction twice and leaves the
// same providers.
func TestLifecycleRestoresFromItsSnapshot(t *testing.T) {
	ends := []End{EndPreempted, EndLost, EndRetryExit, EndNotStarted, EndPreempted}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 11))
		spec := lifeSpec(rng.IntN(4))
		l := NewLifecycle(spec, "")
		l.Avoid("z", "its service replica was lost with it")
		l.Placed(Result{})
		random := func(n int) RunEnd {
			e := RunEnd{End: ends[rng.IntN(len(ends))], Cause: StartCause(rng.IntN(5)), Provider: string(rune('a' + rng.IntN(5))), Why: fmt.Sprint("end ", n)}
			if e.End == EndPreempted && rng.IntN(2) == 0 {
				e.Checkpoint = []byte{byte(n)}
			}
			return e
		}
		for n := range rng.IntN(8) {
			if l.Ended(random(n)).Done {
				break
			}
			l.Placed(Result{Attempt: l.Policy().Attempt})
		}
		raw, err := json.Marshal(l.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		var snap Snapshot
		if err := json.Unmarshal(raw, &snap); err != nil {
			t.Fatal(err)
		}
		r := Restore(spec, "", snap, l.Checkpoint())
		for n := 100; n < 110; n++ {
			if !reflect.DeepEqual(r.Snapshot(), l.Snapshot()) || !bytes.Equal(r.Checkpoint(), l.Checkpoint()) ||
				!samePolicy(r.Policy(), l.Policy()) || r.After() != l.After() || !maps.Equal(r.Exclude(), l.Exclude()) || !maps.Equal(r.LastResort(), l.LastResort()) {
				t.Fatalf("seed %d: restored %+v (policy %+v), want %+v (policy %+v)", seed, r.Snapshot(), r.Policy(), l.Snapshot(), l.Policy())
			}
			e := random(n)
			a, b := l.Ended(e), r.Ended(e)
			if a != b {
				t.Fatalf("seed %d: the restored lifecycle decided %+v, the original %+v", seed, b, a)
			}
			if a.Done {
				break
			}
			l.Placed(Result{Attempt: l.Policy().Attempt})
			r.Placed(Result{Attempt: r.Policy().Attempt})
		}
	}
}

func samePolicy(a, b Policy) bool {
	return a.MaxReauctions == b.MaxReauctions && a.Attempt == b.Attempt && a.Patience == b.Patience
}
