package sim

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// arrayWorld is n one-GPU providers (open all horizon long) and one
// array of shards one-hour shards of 1 GPU, at most par at once,
// expanded.
func arrayWorld(n, shards, par int, tier auction.Tier, hours int64) (*Supply, *Demand, int64) {
	horizon := hours * 3600
	s := &Supply{OnDemand: map[string]auction.Credits{"A100-80GB": 1_500_000}}
	for i := range n {
		s.Providers = append(s.Providers, Provider{ID: fmt.Sprintf("p%02d", i), Model: "A100-80GB", VRAMMiB: 81920, GPUs: 1,
			Country: "DE", Continent: "eu", Windows: []Span{{0, horizon}},
			Floors: auction.Prices{Gold: 1_000_000, Silver: 900_000, Bronze: 400_000}})
	}
	d := &Demand{Renters: []Behaviour{Honest}, Jobs: []Job{{ID: "arr", Submit: 120, Duration: 3600, GPUs: 1,
		Tier: tier, MaxPrice: 1_500_000, Kind: KindBatch, Shards: shards, MaxParallel: par}}}
	d, _ = ExpandArrays(d)
	return s, d, horizon
}

// mostAtOnce is the most runs of st's outcomes (of jobs) running at one
// instant.
func mostAtOnce(st Strategy, jobs []int) int {
	var runs []Run
	for _, k := range jobs {
		runs = append(runs, st.Outcomes[k].Runs...)
	}
	most := 0
	for _, r := range runs {
		n := 0
		for _, x := range runs {
			if x.Start <= r.Start && r.Start < x.End {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func allShards(d *Demand) []int {
	g, names := arrayGroups(d)
	return g[names[0]]
}

func TestArrayMarketHoldsMaxParallel(t *testing.T) {
	s, d, h := arrayWorld(4, 6, 2, auction.Silver, 12)
	if len(d.Jobs) != 6 || d.Jobs[5].ID != "arr.s5" || d.Jobs[5].Array != d.Jobs[0].Array || d.Jobs[5].MaxParallel != 2 {
		t.Fatalf("expanded: %+v", d.Jobs)
	}
	st := conservedMarket(t, noJitter(), s, d, h)
	for k, o := range st.Outcomes {
		if !o.Completed {
			t.Fatalf("shard %d not completed: %q, runs %+v", k, o.Reason, o.Runs)
		}
	}
	if n := mostAtOnce(st, allShards(d)); n != 2 {
		t.Fatalf("%d shards ran at once, want max_parallel 2", n)
	}
	a := arrayMetrics(d, st)
	if a == nil || a.Arrays != 1 || a.Shards != 6 || a.Completed != 1 {
		t.Fatalf("array metrics %+v", a)
	}
	// Three rounds of two one-hour shards: at least 3 h, and not much
	// more (each round waits for its shards' pulls and one auction).
	if a.MakespanP50Sec < 3*3600 || a.OverIdealP50 < 1 || a.OverIdealP50 > 1.2 {
		t.Fatalf("makespan %d s, %.2fx ideal: want 3 h to 1.2x", a.MakespanP50Sec, a.OverIdealP50)
	}
	// Every shard at once when max_parallel allows: the same array runs
	// on all four providers.
	s, d, h = arrayWorld(4, 6, 0, auction.Silver, 12)
	st = conservedMarket(t, noJitter(), s, d, h)
	if n := mostAtOnce(st, allShards(d)); n != 4 {
		t.Fatalf("%d shards ran at once with max_parallel 0 on 4 providers, want 4", n)
	}
}

func TestArrayMarketPreemptedShardPlacedAgain(t *testing.T) {
	s, d, h := arrayWorld(2, 2, 2, auction.Bronze, 12)
	// A silver job wants one GPU while both shards run on the only two:
	// one shard is preempted and must be placed again.
	d.Jobs = append(d.Jobs, Job{ID: "silver", Submit: 1800, Duration: 3600, GPUs: 1, Tier: auction.Silver,
		MaxPrice: 1_500_000, Kind: KindBatch})
	st := conservedMarket(t, noJitter(), s, d, h)
	preempted := 0
	for k, o := range st.Outcomes {
		if !o.Completed {
			t.Fatalf("job %d not completed: %q, runs %+v", k, o.Reason, o.Runs)
		}
		if k < 2 && len(o.Runs) > 1 && o.Runs[0].Preempted {
			preempted++
		}
	}
	if preempted != 1 {
		t.Fatalf("%d shards preempted and run again, want 1: %+v", preempted, st.Outcomes[:2])
	}
}

func TestArrayBaselinesReleaseAsMaxParallelAllows(t *testing.T) {
	for _, name := range BaselineNames() {
		for _, c := range []struct{ par, want int }{{2, 2}, {0, 4}} {
			s, d, h := arrayWorld(4, 6, c.par, auction.Silver, 12)
			st, err := RunBaseline(name, s, d, BaselineOptions{Seed: 1, Horizon: h, Retry: 300, Patience: 6 * 3600, CheckpointSec: 600, Notice: 30})
			if err != nil {
				t.Fatal(err)
			}
			for k, o := range st.Outcomes {
				if !o.Completed {
					t.Fatalf("%s: shard %d not completed: %q", name, k, o.Reason)
				}
			}
			if n := mostAtOnce(st, allShards(d)); n != c.want {
				t.Fatalf("%s, max_parallel %d: %d shards ran at once, want %d", name, c.par, n, c.want)
			}
			if c.par == 2 {
				// Released back to back: the last shard ends 3 h after submit.
				if a := arrayMetrics(d, st); a.MakespanP50Sec != 3*3600 || a.OverIdealP50 != 1 {
					t.Fatalf("%s: makespan %d s (%.2fx ideal), want 3 h", name, a.MakespanP50Sec, a.OverIdealP50)
				}
			}
		}
	}
}

func TestArrayDemandCSV(t *testing.T) {
	jobs := []Job{
		{ID: "solo", Submit: 0, Duration: 60, GPUs: 2, Tier: auction.Silver, Kind: KindBatch},
		{ID: "arr", Submit: 5, Duration: 600, GPUs: 1, Tier: auction.Bronze, Kind: KindBatch, Shards: 6, MaxParallel: 2},
	}
	var buf bytes.Buffer
	if err := WriteDemandCSV(&buf, &Demand{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), demandHeader+",id,renter,start_s,members,shards,max_parallel\n") {
		t.Fatalf("an array was written without its columns:\n%s", buf.String())
	}
	back, err := ReadDemandCSV(&buf, "x")
	if err != nil || back.Jobs[1].Shards != 6 || back.Jobs[1].MaxParallel != 2 || back.Jobs[0].IsArray() {
		t.Fatalf("read back %+v, %v", back, err)
	}
	// A run's demand, expanded, is written back as the rows it read.
	expanded, from := ExpandArrays(&Demand{Jobs: jobs})
	if len(expanded.Jobs) != 7 || from[6] != 1 {
		t.Fatalf("expanded %d jobs (from %v), want 7", len(expanded.Jobs), from)
	}
	buf.Reset()
	if err := WriteDemandCSV(&buf, expanded); err != nil {
		t.Fatal(err)
	}
	if again, err := ReadDemandCSV(&buf, "x"); err != nil || !sameJob(again.Jobs[1], jobs[1]) || len(again.Jobs) != 2 {
		t.Fatalf("expanded demand read back as %+v, %v", again, err)
	}
	buf.Reset()
	if err := WriteDemandCSV(&buf, &Demand{Jobs: jobs[:1]}); err != nil || strings.Contains(buf.String(), "shards") {
		t.Fatalf("a demand without arrays gained the shards column (%v):\n%s", err, buf.String())
	}
	h13 := demandHeader + ",id,renter,start_s,members,shards\n"
	h14 := demandHeader + ",id,renter,start_s,members,shards,max_parallel\n"
	for _, c := range []struct{ body, want string }{
		{h13 + "0,60,1,,silver,,,batch,j,0,0,1,0\n", `d.csv:2:13: shards: "0" is not a whole number 1..10000 (1: not an array)`},
		{h13 + "0,60,1,,silver,,,batch,j,0,0,1,10001\n", `d.csv:2:13: shards: "10001" is not a whole number 1..10000`},
		{h13 + "0,60,1,,silver,,,batch,j,0,0,1,x\n", `d.csv:2:13: shards: "x" is not a whole number`},
		{h13 + "500,60,1,,gold,,,batch,j,0,600,1,4\n", `d.csv:2:13: shards: "4": an array is silver or bronze`},
		{h13 + "0,60,1,,silver,,,batch,j,0,0,2,4\n", `d.csv:2:13: shards: "4": a shard is one job, not a gang (members 2)`},
		{h14 + "0,60,1,,silver,,,batch,j,0,0,1,4,5\n", `d.csv:2:14: max_parallel: "5" is more than the array's 4 shards`},
		{h14 + "0,60,1,,silver,,,batch,j,0,0,1,1,1\n", `d.csv:2:14: max_parallel: "1": only an array has max_parallel`},
		{h14 + "0,60,1,,silver,,,batch,j,0,0,1,4,-1\n", `d.csv:2:14: max_parallel: "-1" is not a whole number 0..10000`},
	} {
		_, err := ReadDemandCSV(strings.NewReader(c.body), "d.csv")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.body, err, c.want)
		}
	}
	// A row of shards 1 and max_parallel 0 is an ordinary job.
	d, err := ReadDemandCSV(strings.NewReader(h14+"0,60,1,,silver,,,batch,j,0,0,1,1,0\n"), "d.csv")
	if err != nil || d.Jobs[0].IsArray() {
		t.Fatalf("%+v, %v", d, err)
	}
}

func TestArrayNotExpandedRefused(t *testing.T) {
	s, _, h := arrayWorld(2, 2, 2, auction.Silver, 2)
	d := &Demand{Renters: []Behaviour{Honest}, Jobs: []Job{{ID: "a", Submit: 0, Duration: 60, GPUs: 1, Tier: auction.Silver, Kind: KindBatch, Shards: 3}}}
	if _, _, err := RunMarket(noJitter(), s, d, h, nil); err == nil || !strings.Contains(err.Error(), "not expanded") {
		t.Fatalf("market ran an array row: %v", err)
	}
	if _, err := RunBaseline(BaselineCentralOnline, s, d, BaselineOptions{Horizon: h, Retry: 300, Patience: 3600, CheckpointSec: 600}); err == nil {
		t.Fatal("baseline ran an array row")
	}
}

// A run with arrays is the same run per seed: the array's decisions and
// the shards' auctions depend on nothing but the seed.
func TestArrayMarketDeterministic(t *testing.T) {
	var runs []Strategy
	for range 2 {
		s, d, h := arrayWorld(3, 8, 3, auction.Bronze, 12)
		d.Jobs = append(d.Jobs, Job{ID: "silver", Submit: 1800, Duration: 3600, GPUs: 1, Tier: auction.Silver, MaxPrice: 1_500_000, Kind: KindBatch})
		st, _, err := RunMarket(DefaultConfig(), s, d, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, st)
	}
	if !reflect.DeepEqual(runs[0].Outcomes, runs[1].Outcomes) {
		t.Fatalf("two runs of one seed differ:\n%+v\n%+v", runs[0].Outcomes, runs[1].Outcomes)
	}
}

// conservedMarket runs the market on s and d to horizon h and fails t
// unless the run conserved every GPU-second.
func conservedMarket(t *testing.T, cfg Config, s *Supply, d *Demand, h int64) Strategy {
	t.Helper()
	st, _, err := RunMarket(cfg, s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConservation(s, d, st, h); err != nil {
		t.Fatal(err)
	}
	return st
}
