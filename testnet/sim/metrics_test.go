package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

const rpHorizon = 2 * 86400 // two simulated days

// rpSupply is three providers over a two-day horizon:
//
//	p0 honest A100 x2, windows [0,10h) and [24h,34h): 2*20h = 40 GPU-h
//	p1 skip   A100 x1, window [0,49h) clipped to 48h:  1*48h = 48 GPU-h
//	p2 honest H100 x4, window [-1h,2h) clipped to 2h:  4*2h  =  8 GPU-h
//
// 96 GPU-h offered; on demand A100 2 credits, H100 4 credits per GPU-hour.
func rpSupply() *Supply {
	return &Supply{
		Providers: []Provider{
			{ID: "p0", Model: "A100", GPUs: 2, Windows: []Span{{0, 36000}, {86400, 86400 + 36000}}},
			{ID: "p1", Model: "A100", GPUs: 1, Windows: []Span{{0, rpHorizon + 3600}}, Behaviour: Skip},
			{ID: "p2", Model: "H100", GPUs: 4, Windows: []Span{{-3600, 7200}}},
		},
		OnDemand: map[string]auction.Credits{"A100": 2_000_000, "H100": 4_000_000},
		Sources:  []string{"hand-built"},
	}
}

// rpDemand is five jobs; renter 1, who submits j4, does not pay.
func rpDemand() *Demand {
	return &Demand{
		Jobs: []Job{
			{ID: "j0", Submit: 0, Duration: 7200, GPUs: 2, Tier: auction.Bronze, Kind: "batch"},
			{ID: "j1", Submit: 1000, Duration: 3600, GPUs: 4, Tier: auction.Silver, Kind: "training"},
			{ID: "j2", Submit: 0, Start: 3600, Duration: 3600, GPUs: 1, Tier: auction.Gold, Kind: "serving"},
			{ID: "j3", Submit: 0, Start: 7200, Duration: 3600, GPUs: 1, Tier: auction.Gold, Kind: "serving"},
			{ID: "j4", Submit: 100000, Duration: 7200, GPUs: 1, Tier: auction.Bronze, Kind: "batch", Renter: 1},
		},
		Renters: []Behaviour{Honest, NonPayer},
		Sources: []string{"hand-built"},
	}
}

// rpStrategy is one schedule of rpDemand on rpSupply:
//
//	j0 bronze: p0 [600,4200) preempted: useful 2*3000, lost 2*600, paid 1;
//	           p0 [90000,94200): useful 2*4200, paid 2. Completed at 94200.
//	j1 silver: p2 [1000,4600) x4: useful 14400, paid 8. Completed at 4600.
//	j2 gold:   p1 [3600,7200): useful 3600, paid 12, honoured. Done at 7200.
//	j3 gold:   never ran.
//	j4 bronze: p1 [100000,103600): useful 3600, paid 0; horizon.
func rpStrategy(name string) Strategy {
	return Strategy{
		Name: name,
		Outcomes: []Outcome{
			{Job: 0, Completed: true, Done: 14400, Finished: 94200, Runs: []Run{
				{Provider: 0, GPUs: 2, Start: 600, End: 4200, Useful: 6000, Lost: 1200, Paid: 1_000_000, Preempted: true},
				{Provider: 0, GPUs: 2, Start: 90000, End: 94200, Useful: 8400, Paid: 2_000_000},
			}},
			{Job: 1, Completed: true, Done: 14400, Finished: 4600, Runs: []Run{
				{Provider: 2, GPUs: 4, Start: 1000, End: 4600, Useful: 14400, Paid: 8_000_000},
			}},
			{Job: 2, Completed: true, Done: 3600, Finished: 7200, Honoured: true, Runs: []Run{
				{Provider: 1, GPUs: 1, Start: 3600, End: 7200, Useful: 3600, Paid: 12_000_000},
			}},
			{Job: 3, Reason: "no capacity"},
			{Job: 4, Reason: "horizon", Done: 3600, Runs: []Run{
				{Provider: 1, GPUs: 1, Start: 100000, End: 103600, Useful: 3600},
			}},
		},
		// 5 nodes (3 providers, 2 renters) over 172800 s: 2 B/s each.
		Messages: Traffic{Messages: 50, Bytes: 5000, GossipBytes: 5 * rpHorizon * 2},
	}
}

func rpNear(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestComputeMetricsByHand(t *testing.T) {
	m := ComputeMetrics(rpSupply(), rpDemand(), rpStrategy("market"), rpHorizon, 72000)
	rpNear(t, "offered", m.OfferedGPUHours, 40+48+8)
	// sold: j0 2*3600+2*4200, j1 4*3600, j2 3600, j4 3600 = 37200 GPU-s.
	rpNear(t, "sold", m.SoldGPUHours, 37200.0/3600)
	rpNear(t, "useful", m.UsefulGPUHours, 36000.0/3600)
	rpNear(t, "filled", m.FilledShare, 37200.0/(96*3600))
	rpNear(t, "useful of bound", m.UsefulShareOfBound, 36000.0/72000)

	all, gold, silver, bronze := m.Tiers[0], m.Tiers[1], m.Tiers[2], m.Tiers[3]
	if all.Tier != "all" || gold.Tier != "gold" || silver.Tier != "silver" || bronze.Tier != "bronze" {
		t.Fatalf("tier order %v %v %v %v", all.Tier, gold.Tier, silver.Tier, bronze.Tier)
	}
	// Paid 1+2+8+12+0 = 23 credits. On demand: A100 useful 14400+3600+3600
	// GPU-s = 6 GPU-h at 2 = 12, H100 4 GPU-h at 4 = 16: 28 credits.
	if all.Paid != 23_000_000 || all.OnDemand != 28_000_000 {
		t.Errorf("all paid %d on-demand %d, want 23e6 28e6", all.Paid, all.OnDemand)
	}
	rpNear(t, "all cost share", all.CostShare, 23.0/28)
	// Bronze: paid 3 for 5 GPU-h of A100 useful work (10 on demand).
	if bronze.Paid != 3_000_000 || bronze.OnDemand != 10_000_000 {
		t.Errorf("bronze paid %d on-demand %d, want 3e6 10e6", bronze.Paid, bronze.OnDemand)
	}
	rpNear(t, "bronze cost share", bronze.CostShare, 0.3)
	// Preemption lost 1200 GPU-s: of 37200 sold overall, of 19200 in bronze.
	rpNear(t, "lost", all.PreemptionLostGPUHours, 1200.0/3600)
	rpNear(t, "lost share", all.PreemptionLostShare, 1200.0/37200)
	rpNear(t, "bronze lost share", bronze.PreemptionLostShare, 1200.0/19200)
	if silver.PreemptionLostShare != 0 {
		t.Errorf("silver lost %v, want 0", silver.PreemptionLostShare)
	}
	// Completed j0, j1, j2: waits 600, 0, 0 (gold from its Start); JCTs
	// 94200, 3600, 7200. Nearest rank of 3: p50 is rank 2, p95 rank 3.
	if all.Completed != 3 || all.Jobs != 5 {
		t.Errorf("completed %d of %d, want 3 of 5", all.Completed, all.Jobs)
	}
	rpNear(t, "completion", all.CompletionShare, 0.6)
	if all.WaitP50Sec != 0 || all.WaitP95Sec != 600 || all.JCTP50Sec != 7200 || all.JCTP95Sec != 94200 {
		t.Errorf("wait %d/%d jct %d/%d, want 0/600 7200/94200", all.WaitP50Sec, all.WaitP95Sec, all.JCTP50Sec, all.JCTP95Sec)
	}
	if gold.WaitP95Sec != 0 || gold.JCTP95Sec != 7200 {
		t.Errorf("gold wait p95 %d jct p95 %d, want 0 and 7200", gold.WaitP95Sec, gold.JCTP95Sec)
	}
	// Two gold jobs demanded, one made (it ran) and honoured.
	if g := m.Gold; g.Demanded != 2 || g.Made != 1 || g.Honoured != 1 {
		t.Errorf("gold %+v, want 2 demanded, 1 made, 1 honoured", g)
	}
	rpNear(t, "honoured share", m.Gold.HonouredShare, 1)
	rpNear(t, "honoured of demanded", m.Gold.HonouredOfDemanded, 0.5)
	// Income per offered GPU-hour: p0 3/40 = 0.075, p1 12/48 = 0.25,
	// p2 8/8 = 1. Gini of (0.075, 0.25, 1): (-2*0.075 + 0 + 2*1) / (3*1.325).
	in := m.Income
	rpNear(t, "income mean", in.Mean, 1.325/3)
	rpNear(t, "income p10", in.P10, 0.075)
	rpNear(t, "income p50", in.P50, 0.25)
	rpNear(t, "income p90", in.P90, 1)
	rpNear(t, "gini", in.Gini, 1.85/3.975)
	rpNear(t, "messages per job", m.MessagesPerJob, 10)
	rpNear(t, "bytes per job", m.BytesPerJob, 1000)
	rpNear(t, "gossip", m.GossipBytesPerNodePerSec, 2)
	// j0's one preempted run ended at 4200 and the job ran again at 90000.
	if all.PreemptedRuns != 1 || all.Returned != 1 || all.ReturnP50Sec != 85800 || all.ReturnP95Sec != 85800 {
		t.Errorf("preempted %d, returned %d, p50 %d p95 %d; want 1, 1, 85800, 85800", all.PreemptedRuns, all.Returned, all.ReturnP50Sec, all.ReturnP95Sec)
	}
}

func TestNearestRankAndGini(t *testing.T) {
	v := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	// ceil(p*10/100): p50 rank 5, p95 rank 10, p10 rank 1, p11 rank 2.
	for p, want := range map[int]int64{50: 50, 95: 100, 10: 10, 11: 20, 0: 10, 100: 100} {
		if got := nearestRank(v, p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
	}
	if got := nearestRank([]int64(nil), 50); got != 0 {
		t.Errorf("empty p50 = %d, want 0", got)
	}
	rpNear(t, "gini equal", giniSorted([]float64{3, 3, 3, 3}), 0)
	rpNear(t, "gini one holds all", giniSorted([]float64{0, 0, 0, 5}), 0.75)
	// (1,2,3): (-2*1 + 0*2 + 2*3) / (3*6) = 4/18.
	rpNear(t, "gini 1,2,3", giniSorted([]float64{1, 2, 3}), 4.0/18)
	rpNear(t, "gini nothing", giniSorted([]float64{0, 0}), 0)
}

func TestAdversaryTableByHand(t *testing.T) {
	rows := AdversaryTable(rpSupply(), rpDemand(), rpStrategy("market"), rpHorizon)
	var got []string
	for _, r := range rows {
		got = append(got, r.Side+":"+r.Behaviour)
	}
	if want := []string{"provider:honest", "provider:skip", "renter:honest", "renter:nonpayer"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	honest, skip := rows[0], rows[1]
	if honest.Providers != 2 || skip.Providers != 1 {
		t.Errorf("providers %d honest %d skip, want 2 and 1", honest.Providers, skip.Providers)
	}
	// Honest: p0 0.075 and p2 1.0 per offered GPU-hour, mean 0.5375.
	rpNear(t, "honest income", honest.IncomePerOfferedGPUHour, 0.5375)
	rpNear(t, "skip income", skip.IncomePerOfferedGPUHour, 0.25)
	// Day 0 honest earned 1 (p0) + 8 (p2) on 20+8 GPU-h offered; day 1
	// 2 (p0) on 20. Skip earned 12 on day 0 and 0 on day 1, on 24 each:
	// ahead on day 0, behind from day 1.
	rpNear(t, "honest day 0", honest.DailyIncomePerOfferedGPUHour[0], 9.0/28)
	rpNear(t, "honest day 1", honest.DailyIncomePerOfferedGPUHour[1], 2.0/20)
	rpNear(t, "skip day 0", skip.DailyIncomePerOfferedGPUHour[0], 12.0/24)
	rpNear(t, "honest per provider day 0", honest.DailyIncomePerProvider[0], 4.5)
	if skip.FirstDayBelowHonest != 1 || skip.BehindFromDay != 1 {
		t.Errorf("skip first below %d behind from %d, want 1 and 1", skip.FirstDayBelowHonest, skip.BehindFromDay)
	}
	if honest.FirstDayBelowHonest != -1 {
		t.Errorf("honest first below %d, want -1", honest.FirstDayBelowHonest)
	}
	// Honest renters: 4 jobs, 3 completed, paid 23 for 9 useful GPU-hours.
	rh, rn := rows[2], rows[3]
	if rh.Jobs != 4 || rn.Jobs != 1 {
		t.Errorf("renter jobs %d and %d, want 4 and 1", rh.Jobs, rn.Jobs)
	}
	rpNear(t, "honest renters completed", rh.CompletedShare, 0.75)
	rpNear(t, "honest renters paid", rh.PaidPerUsefulGPUHour, 23.0/9)
	rpNear(t, "nonpayer paid", rn.PaidPerUsefulGPUHour, 0)
}

func TestDaysBehind(t *testing.T) {
	honest := []float64{1, 1, 1, 1}
	for _, c := range []struct {
		cheat             []float64
		firstBelow, since int
	}{
		{[]float64{2, 0.5, 2, 0.5}, 1, 3}, // behind, ahead again, behind
		{[]float64{2, 2, 2, 2}, -1, -1},
		{[]float64{0, 0, 0, 0}, 0, 0},
		{[]float64{0.5, 0.5, 0.5, 3}, 0, -1}, // ahead on the last day
	} {
		fb, since := daysBehind(c.cheat, honest)
		if fb != c.firstBelow || since != c.since {
			t.Errorf("daysBehind(%v) = %d, %d, want %d, %d", c.cheat, fb, since, c.firstBelow, c.since)
		}
	}
}

func TestComputeSeriesByHand(t *testing.T) {
	s := ComputeSeries(rpSupply(), rpDemand(), []Strategy{rpStrategy("market")}, rpHorizon)
	if s.StepSec != 3600 || len(s.Utilisation) != 1 || len(s.Utilisation[0].Points) != 48 {
		t.Fatalf("step %d, %d curves", s.StepSec, len(s.Utilisation))
	}
	u := s.Utilisation[0].Points
	// Hour 0: 7 GPUs open; j0 2 GPUs for 3000 s, j1 4 GPUs for 2600 s.
	rpNear(t, "util hour 0", u[0].Y, (2*3000+4*2600)/(7*3600.0))
	// Hour 1: j0 2x600, j1 4x1000, j2 1x3600.
	rpNear(t, "util hour 1", u[1].Y, (2*600+4*1000+3600)/(7*3600.0))
	rpNear(t, "hour 1 x in days", u[1].X, 1.0/24)
	// JCT CDF over 1 h, 2 h and 94200 s.
	jct := s.JCT[0].Points
	if len(jct) != 3 || jct[0] != (SeriesPoint{1, 1.0 / 3}) || jct[2].Y != 1 {
		t.Errorf("jct cdf %v", jct)
	}
	rpNear(t, "jct max", jct[2].X, 94200.0/3600)
	// Income curve, highest first: p2 1.0, p1 0.25, p0 0.075.
	inc := s.Income[0].Points
	if len(inc) != 3 || inc[0].Y != 1 || inc[2].Y != 0.075 || inc[2].X != 1 {
		t.Errorf("income curve %v", inc)
	}
	// Price shares, all tiers: j0 3/8, j1 8/16, j2 12/2; j4 paid 0 of 2.
	for _, c := range s.PriceShare {
		if c.Tier == "bronze" && (len(c.Points) != 2 || c.Points[0].X != 0 || c.Points[1].X != 3.0/8) {
			t.Errorf("bronze price shares %v", c.Points)
		}
		if c.Tier == "all" && len(c.Points) != 4 {
			t.Errorf("all price shares %v", c.Points)
		}
	}
}

func TestBucketsAndThinning(t *testing.T) {
	b := newBuckets(4*3600, 3600)
	b.add(1800, 3*3600+900, 1) // half, whole, whole, a quarter
	b.add(-100, 100, 2)        // clipped at 0
	b.add(4*3600-10, 5*3600, 3)
	if got, want := b.totals(), []int64{1800 + 200, 3600, 3600, 900 + 30}; !slices.Equal(got, want) {
		t.Errorf("totals %v, want %v", got, want)
	}
	if got := seriesStep(30 * 86400); got != 2*3600 {
		t.Errorf("step for 720 h = %d, want 7200 (at most 400 points)", got)
	}
	r := thinnedRanks(1000)
	if len(r) != maxSeriesPoints || r[0] != 3 || r[len(r)-1] != 1000 {
		t.Errorf("thinned ranks: %d, first %d, last %d", len(r), r[0], r[len(r)-1])
	}
}

// rpSynthetic is n jobs on n/100 providers with one or two runs each.
func rpSynthetic(n int) (*Supply, *Demand, Strategy) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := &Supply{OnDemand: map[string]auction.Credits{"A100": 2_000_000}}
	for i := range n / 100 {
		s.Providers = append(s.Providers, Provider{ID: "p", Model: "A100", GPUs: 8,
			Windows: []Span{{int64(i % 3600), 30 * 86400}}, Behaviour: []Behaviour{Honest, Skip}[i%2]})
	}
	d := &Demand{Renters: []Behaviour{Honest, NonPayer}}
	st := Strategy{Name: "market"}
	for i := range n {
		submit := rng.Int64N(29 * 86400)
		job := Job{Submit: submit, Duration: 3600, GPUs: 2, Tier: auction.Bronze, Renter: i % 2}
		d.Jobs = append(d.Jobs, job)
		o := Outcome{Job: i, Completed: i%3 != 0, Done: 7200}
		for k := range 1 + i%2 {
			start := submit + int64(k)*4000
			o.Runs = append(o.Runs, Run{Provider: rng.IntN(len(s.Providers)), GPUs: 2, Start: start,
				End: start + 3600, Useful: 3600, Paid: 1_000_000, Preempted: k == 0 && i%2 == 1})
		}
		o.Finished = o.Runs[len(o.Runs)-1].End
		st.Outcomes = append(st.Outcomes, o)
	}
	return s, d, st
}

func BenchmarkComputeMetrics(b *testing.B) {
	s, d, st := rpSynthetic(100_000)
	for b.Loop() {
		ComputeMetrics(s, d, st, 30*86400, 1e9)
		AdversaryTable(s, d, st, 30*86400)
	}
}
