package sim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestGangMarketCompletesOnDistinctProviders(t *testing.T) {
	s, d, h := gangWorld(4, 3, auction.Silver, 12)
	st := conservedMarket(t, noJitter(), s, d, h)
	o := st.Outcomes[0]
	if !o.Completed {
		t.Fatalf("gang not completed: %q, runs %+v", o.Reason, o.Runs)
	}
	if len(o.Runs) != 3 {
		t.Fatalf("%d runs, want one per member: %+v", len(o.Runs), o.Runs)
	}
	provs := map[int]bool{}
	for _, r := range o.Runs {
		provs[r.Provider] = true
		if r.Useful != 3*3600 || r.Lost != 0 {
			t.Fatalf("member run %+v: want 3 h useful, none lost", r)
		}
	}
	if len(provs) != 3 {
		t.Fatalf("members on %d distinct providers, want 3: %+v", len(provs), o.Runs)
	}
	if starts := gangStarts(o); len(starts) != 1 {
		t.Fatalf("members started at %v, want one instant (the barrier)", starts)
	}
}

func TestGangMarketNeedsEnoughProviders(t *testing.T) {
	s, d, h := gangWorld(2, 3, auction.Silver, 6)
	st, _, err := RunMarket(noJitter(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := st.Outcomes[0]
	if o.Completed || len(o.Runs) != 0 {
		t.Fatalf("a gang of 3 on 2 providers ran: %+v", o)
	}
}

func TestGangMarketMemberPreemptedStopsSiblingsAndReplaces(t *testing.T) {
	s, d, h := gangWorld(3, 3, auction.Bronze, 12)
	// A silver job wants one GPU an hour into the gang's run: the only
	// GPUs are the gang's, so one member is preempted.
	d.Jobs = append(d.Jobs, Job{ID: "silver", Submit: 3900, Duration: 3600, GPUs: 1, Tier: auction.Silver,
		MaxPrice: 1_500_000, Kind: KindBatch})
	st := conservedMarket(t, noJitter(), s, d, h)
	gang, silver := st.Outcomes[0], st.Outcomes[1]
	if !silver.Completed {
		t.Fatalf("silver job not completed: %q", silver.Reason)
	}
	if !gang.Completed {
		t.Fatalf("gang not completed after its preemption: %q, runs %+v", gang.Reason, gang.Runs)
	}
	var first []Run
	for _, r := range gang.Runs {
		if r.Preempted {
			first = append(first, r)
		}
	}
	if len(first) != 3 {
		t.Fatalf("%d preempted runs, want the 3 members of the first placement (the siblings stopped with it): %+v", len(first), gang.Runs)
	}
	lost := int64(0)
	for _, r := range first {
		lost += r.Lost
		if r.End > silver.Runs[0].Start+int64(DefaultConfig().Notice.Seconds())+5 || r.End < 3900 {
			t.Fatalf("member run %+v did not stop with the preemption (silver started at %d)", r, silver.Runs[0].Start)
		}
		if r.Useful != first[0].Useful {
			t.Fatalf("members kept different progress %d and %d: a gang steps together", r.Useful, first[0].Useful)
		}
	}
	if lost == 0 {
		t.Fatalf("no GPU-seconds lost to the gang's preemption: %+v", first)
	}
	// Placed again from the checkpoint, on three providers at once, after
	// the silver job freed its GPU.
	if len(gang.Runs) != 6 {
		t.Fatalf("%d runs, want 3 preempted and 3 after re-placement: %+v", len(gang.Runs), gang.Runs)
	}
	again := gang.Runs[3:]
	if starts := gangStarts(Outcome{Runs: again}); len(starts) != 1 || starts[0] < silver.Finished {
		t.Fatalf("re-placed members started at %v, want one instant after the silver job's end %d", starts, silver.Finished)
	}
	if again[0].Useful != 3*3600-first[0].Useful {
		t.Fatalf("re-placed member did %d s, want the rest after the checkpoint kept: %d", again[0].Useful, 3*3600-first[0].Useful)
	}
}

func TestGangMarketDeterministic(t *testing.T) {
	s, d, h := mkWorld(5, 10, 40, 1)
	g, n := GangsWiderThan(d, 1)
	if n == 0 {
		t.Fatal("no gangs")
	}
	a, _, err := RunMarket(DefaultConfig(), s, g, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := RunMarket(DefaultConfig(), s, g, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConservation(s, g, a, h); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Outcomes, b.Outcomes) {
		t.Fatal("the same seed gave two different runs with gangs")
	}
}

// Gangs among cheating providers and a non-paying renter: whatever
// befalls a member (a provider that does nothing, fakes, walks away or
// refuses the award; a renter that stops paying), the run conserves
// GPU-seconds, every gang settles, and no gang completes with work
// undone.
func TestGangMarketWithAdversariesConserves(t *testing.T) {
	s, d, h := mkWorld(7, 12, 60, 2)
	for i, b := range []Behaviour{Skip, Fake, Abandon, Refuse} {
		s.Providers[i].Behaviour = b
	}
	d.Renters[2] = NonPayer
	g, n := GangsWiderThan(d, 1)
	if n == 0 {
		t.Fatal("no gangs")
	}
	st := conservedMarket(t, DefaultConfig(), s, g, h)
	placed := 0
	for _, o := range st.Outcomes {
		j := &g.Jobs[o.Job]
		if !j.Gang() {
			continue
		}
		if _, ok := allRunning(o.Runs, j.Members); ok {
			placed++
		}
		if !o.Completed && o.Reason == "" {
			t.Fatalf("gang %s neither completed nor gave a reason", j.ID)
		}
	}
	if placed == 0 {
		t.Fatal("no gang was ever placed whole")
	}
}

// node's check at submit: a gang the book can never hold (here, two of
// four providers price themselves above its max price) is refused before
// any round, with the field to change.
func TestGangMarketRefusedAtSubmitWhenTheBookCannotHoldIt(t *testing.T) {
	s, d, h := gangWorld(4, 3, auction.Silver, 6)
	for i := range 2 {
		s.Providers[i].Floors.Silver = 2_000_000 // above the gang's max price
	}
	st, stats, err := RunMarket(noJitter(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := st.Outcomes[0]
	if o.Completed || len(o.Runs) != 0 || !strings.Contains(o.Reason, "refused at submit: gang.members") {
		t.Fatalf("outcome %+v: want refused at submit, naming gang.members", o)
	}
	if stats.Rounds != 0 {
		t.Fatalf("%d rounds run for a gang refused at submit", stats.Rounds)
	}
}
