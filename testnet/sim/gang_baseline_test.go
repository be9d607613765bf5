package sim

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestGangBaselineWaitsForDistinctProvidersFreeAtOnce(t *testing.T) {
	s, d, h := gangWorld(3, 3, auction.Silver, 12)
	// A silver job holds one of the three GPUs for the first hour.
	d.Jobs = append([]Job{{ID: "solo", Submit: 0, Duration: 3600, GPUs: 1, Tier: auction.Silver, MaxPrice: 1_500_000, Kind: KindBatch}}, d.Jobs...)
	st, err := RunBaseline(BaselineCentralOnline, s, d, BaselineOptions{Horizon: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConservation(s, d, st, h); err != nil {
		t.Fatal(err)
	}
	o := st.Outcomes[1]
	if !o.Completed || len(o.Runs) != 3 {
		t.Fatalf("gang: %+v", o)
	}
	provs := map[int]bool{}
	for _, r := range o.Runs {
		provs[r.Provider] = true
	}
	if starts := gangStarts(o); len(provs) != 3 || len(starts) != 1 || starts[0] != 3600 {
		t.Fatalf("members on %d providers starting at %v: want 3 providers at 3600, when the third came free", len(provs), starts)
	}
	// Two providers cannot hold three members: never placed.
	s2, d2, h2 := gangWorld(2, 3, auction.Silver, 6)
	st2, err := RunBaseline(BaselineCentralOnline, s2, d2, BaselineOptions{Horizon: h2})
	if err != nil {
		t.Fatal(err)
	}
	if o := st2.Outcomes[0]; o.Completed || len(o.Runs) != 0 {
		t.Fatalf("a gang of 3 on 2 providers ran: %+v", o)
	}
}

func TestGangBaselinePreemptionStopsEveryMember(t *testing.T) {
	s, d, h := gangWorld(3, 3, auction.Bronze, 12)
	// A reservation booked an hour in needs one GPU from 4000 s on.
	d.Jobs = append(d.Jobs, Job{ID: "gold", Submit: 1000, Start: 4000, Duration: 1800, GPUs: 1, Tier: auction.Gold,
		MaxPrice: 1_500_000, Kind: KindBatch})
	st, err := RunBaseline(BaselineCentralOnline, s, d, BaselineOptions{Horizon: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConservation(s, d, st, h); err != nil {
		t.Fatal(err)
	}
	o := st.Outcomes[0]
	if !o.Completed {
		t.Fatalf("gang not completed: %+v", o)
	}
	var pre []Run
	for _, r := range o.Runs {
		if r.Preempted {
			pre = append(pre, r)
		}
	}
	if len(pre) != 3 {
		t.Fatalf("%d preempted runs, want all 3 members: %+v", len(pre), o.Runs)
	}
	for _, r := range pre {
		if r.End != 4000 || r.Lost == 0 || r.Useful != pre[0].Useful {
			t.Fatalf("preempted member %+v: want all stopped at 4000 with the same checkpoint and some loss", r)
		}
	}
	if again := gangStarts(Outcome{Runs: o.Runs[3:]}); len(o.Runs) != 6 || len(again) != 1 || again[0] < 5800 {
		t.Fatalf("re-placed at %v (%d runs): want all 3 members together after the reservation's end at 5800", again, len(o.Runs))
	}
}
