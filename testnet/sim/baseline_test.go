package sim

import (
	"reflect"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestBaselineDeterministicAndConserving(t *testing.T) {
	var useful int64
	for seed := uint64(1); seed <= 25; seed++ {
		s, d := blRandomInstance(seed, 6, 40, 2*86400)
		for _, name := range BaselineNames() {
			opt := BaselineOptions{Seed: seed, Horizon: 2 * 86400}
			a := blMustRun(t, name, s, d, opt)
			b := blMustRun(t, name, s, d, opt)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d %s: two runs differ", seed, name)
			}
			if err := CheckConservation(s, d, a, opt.Horizon); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for _, o := range a.Outcomes {
				for _, r := range o.Runs {
					if d.Jobs[o.Job].Tier != auction.Bronze && (r.Preempted || r.Lost != 0) {
						t.Fatalf("seed %d %s: %s job %s preempted: %+v", seed, name, d.Jobs[o.Job].Tier, d.Jobs[o.Job].ID, r)
					}
				}
			}
			useful += blUseful(a)
		}
	}
	if useful == 0 {
		t.Fatal("no baseline did any work: the instances test nothing")
	}
}

// A gold reservation at 7000 s preempts the bronze job holding all four
// GPUs: the bronze keeps 6600 s (its last checkpoint), loses 400 s, and
// resumes after the reservation with 4200 s left.
func TestGoldPreemptsBronzeKeepingCheckpoint(t *testing.T) {
	s, d := blWorld([]Provider{blProvider("p0", 4, blCredit, Span{0, 40000})},
		blJob("bronze", auction.Bronze, 0, 10800, 4),
		Job{ID: "gold", Tier: auction.Gold, Submit: 100, Start: 7000, Duration: 3600, GPUs: 4, MaxPrice: 10 * blCredit})
	for _, name := range BaselineNames() {
		st := blMustRun(t, name, s, d, BaselineOptions{Horizon: 40000})
		g := st.Outcomes[1]
		if !g.Honoured || !g.Completed || len(g.Runs) != 1 || g.Runs[0].Start != 7000 || g.Runs[0].End != 10600 {
			t.Fatalf("%s: gold %+v", name, g)
		}
		b := st.Outcomes[0]
		if len(b.Runs) != 2 {
			t.Fatalf("%s: bronze runs %+v", name, b.Runs)
		}
		first := b.Runs[0]
		if !first.Preempted || first.End != 7000 || first.Useful != 6600*4 || first.Lost != 400*4 {
			t.Fatalf("%s: preempted run %+v", name, first)
		}
		if !b.Completed || b.Finished != b.Runs[1].Start+4200 || b.Runs[1].Start < 10600 {
			t.Fatalf("%s: resumed bronze %+v", name, b)
		}
	}
}

// Bronze cut by its window's close keeps 600 of 1000 s and resumes when
// the next window opens: central-online at once, first-fit at its next
// retry (1000 + 4*300).
func TestBronzePreemptedAtWindowClose(t *testing.T) {
	s, d := blWorld([]Provider{blProvider("p0", 1, blCredit, Span{0, 1000}, Span{2000, 5000})},
		blJob("b", auction.Bronze, 0, 1500, 1))
	for name, resume := range map[string]int64{BaselineCentralOnline: 2000, BaselineFirstFit: 2200} {
		o := blMustRun(t, name, s, d, BaselineOptions{Horizon: 5000}).Outcomes[0]
		if len(o.Runs) != 2 || o.Runs[0].Useful != 600 || o.Runs[0].Lost != 400 || !o.Runs[0].Preempted {
			t.Fatalf("%s: %+v", name, o.Runs)
		}
		if o.Runs[1].Start != resume || !o.Completed || o.Finished != resume+900 {
			t.Fatalf("%s: resumed %+v", name, o)
		}
	}
}

// Silver holds its GPUs to the end: a reservation over it is refused, and
// a silver job too long for any window never starts.
func TestSilverNeverPreemptedNorOverrun(t *testing.T) {
	s, d := blWorld([]Provider{blProvider("p0", 1, blCredit, Span{0, 3600})},
		blJob("s", auction.Silver, 0, 3000, 1),
		Job{ID: "g", Tier: auction.Gold, Submit: 10, Start: 1000, Duration: 600, GPUs: 1, MaxPrice: 10 * blCredit},
		blJob("long", auction.Silver, 0, 4000, 1))
	for _, name := range BaselineNames() {
		st := blMustRun(t, name, s, d, BaselineOptions{Horizon: 3600})
		if o := st.Outcomes[0]; !o.Completed || len(o.Runs) != 1 || o.Runs[0].End != 3000 {
			t.Fatalf("%s: silver %+v", name, o)
		}
		if o := st.Outcomes[1]; len(o.Runs) != 0 || o.Honoured || o.Reason == "" {
			t.Fatalf("%s: gold over silver %+v", name, o)
		}
		if o := st.Outcomes[2]; len(o.Runs) != 0 || o.Reason == "" {
			t.Fatalf("%s: silver longer than the window %+v", name, o)
		}
	}
}

// B waits behind A (30000 s) on the only GPU: with the default 6 h of
// patience it gives up, with 40000 s it runs, at A's end for
// central-online and at its next retry for first-fit.
func TestPatience(t *testing.T) {
	s, d := blWorld([]Provider{blProvider("p0", 1, blCredit, Span{0, 100000})},
		blJob("a", auction.Silver, 0, 30000, 1), blJob("b", auction.Silver, 10, 100, 1))
	for _, name := range BaselineNames() {
		o := blMustRun(t, name, s, d, BaselineOptions{Horizon: 100000}).Outcomes[1]
		if len(o.Runs) != 0 || o.Reason != "no capacity" {
			t.Fatalf("%s: impatient %+v", name, o)
		}
	}
	for name, start := range map[string]int64{BaselineCentralOnline: 30000, BaselineFirstFit: 30010} {
		o := blMustRun(t, name, s, d, BaselineOptions{Horizon: 100000, Patience: 40000}).Outcomes[1]
		if !o.Completed || o.Runs[0].Start != start {
			t.Fatalf("%s: patient %+v", name, o)
		}
	}
}

// The picking rules, and the hub's fee on the price.
func TestBaselineChoicesAndFee(t *testing.T) {
	s, d := blWorld([]Provider{
		blProvider("big", 8, 3*blCredit, Span{0, 10000}),
		blProvider("small", 2, 2*blCredit, Span{0, 10000}),
	}, blJob("j", auction.Silver, 0, 1800, 2))
	want := map[string]int{BaselineFirstFit: 0, BaselineCheapest: 1, BaselineCentralOnline: 1}
	for name, prov := range want {
		r := blMustRun(t, name, s, d, BaselineOptions{Horizon: 10000, HubFeeBP: 1000}).Outcomes[0].Runs[0]
		if r.Provider != prov {
			t.Fatalf("%s picked %d, want %d", name, r.Provider, prov)
		}
		floor := s.Providers[prov].Floors.Silver
		if wantPrice := floor * 11 / 10; r.Price != wantPrice || r.Paid != wantPrice*2*1800/3600 {
			t.Fatalf("%s: price %d paid %d for floor %d +10%%", name, r.Price, r.Paid, floor)
		}
	}
	seen := map[int]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		seen[blMustRun(t, BaselineRandom, s, d, BaselineOptions{Seed: seed, Horizon: 10000}).Outcomes[0].Runs[0].Provider] = true
	}
	if len(seen) != 2 {
		t.Fatalf("random picked only %v over 20 seeds", seen)
	}
	if _, err := RunBaseline("nope", s, d, BaselineOptions{Horizon: 1}); err == nil {
		t.Fatal("unknown baseline accepted")
	}
}

func BenchmarkCentralOnline(b *testing.B) {
	s, d := blRandomInstance(1, 1000, 5000, 2*86400)
	for b.Loop() {
		st, err := RunBaseline(BaselineCentralOnline, s, d, BaselineOptions{Horizon: 2 * 86400})
		if err != nil || blUseful(st) == 0 {
			b.Fatal(err, "no work done")
		}
	}
}
