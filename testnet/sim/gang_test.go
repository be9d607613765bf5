package sim

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// gangWorld is n providers of one GPU each (one model, one continent,
// open all horizon long) and one gang of members 1-GPU members.
func gangWorld(n, members int, tier auction.Tier, hours int64) (*Supply, *Demand, int64) {
	horizon := hours * 3600
	s := &Supply{OnDemand: map[string]auction.Credits{"A100-80GB": 1_500_000}}
	for i := range n {
		s.Providers = append(s.Providers, Provider{ID: fmt.Sprintf("p%02d", i), Model: "A100-80GB", VRAMMiB: 81920, GPUs: 1,
			Country: "DE", Continent: "eu", Windows: []Span{{0, horizon}},
			Floors: auction.Prices{Gold: 1_000_000, Silver: 900_000, Bronze: 400_000}})
	}
	d := &Demand{Renters: []Behaviour{Honest}, Jobs: []Job{{ID: "gang", Submit: 120, Duration: 3 * 3600, GPUs: 1,
		Tier: tier, MaxPrice: 1_500_000, Kind: KindTraining, Members: members}}}
	return s, d, horizon
}

// noJitter is the market's configuration with a fixed round trip, so that
// starts sent together arrive together.
func noJitter() Config {
	cfg := DefaultConfig()
	cfg.Network.Jitter = 0
	return cfg
}

// gangStarts is the distinct starts of o's runs, sorted.
func gangStarts(o Outcome) []int64 {
	var ts []int64
	for _, r := range o.Runs {
		ts = append(ts, r.Start)
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

func TestGangDemandCSVRoundTrip(t *testing.T) {
	jobs := []Job{
		{ID: "solo", Submit: 0, Duration: 60, GPUs: 2, Tier: auction.Silver, Kind: KindBatch},
		{ID: "gang", Submit: 5, Duration: 600, GPUs: 4, Tier: auction.Bronze, Kind: KindTraining, Members: 3},
	}
	var buf bytes.Buffer
	if err := WriteDemandCSV(&buf, &Demand{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), demandHeader+",id,renter,start_s,members\n") {
		t.Fatalf("a demand with a gang was written without the members column:\n%s", buf.String())
	}
	back, err := ReadDemandCSV(bytes.NewReader(buf.Bytes()), "g.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Jobs, jobs) {
		t.Fatalf("read back %+v, wrote %+v", back.Jobs, jobs)
	}
	if w := back.Jobs[1].Work(); w != 600*4*3 {
		t.Fatalf("a gang's work %d, want duration x gpus x members", w)
	}
	// Without a gang the file keeps its eleven columns, as before gangs.
	buf.Reset()
	if err := WriteDemandCSV(&buf, &Demand{Jobs: jobs[:1]}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "members") {
		t.Fatalf("a demand without gangs gained the members column:\n%s", buf.String())
	}
	// Nine columns cannot hold a gang: refused, not dropped.
	if err := WriteDemandCSVNoRenters(&bytes.Buffer{}, &Demand{Jobs: jobs}); err == nil {
		t.Fatal("a gang was written without its members column")
	}
}

func TestGangMetrics(t *testing.T) {
	s, d, h := gangWorld(3, 3, auction.Bronze, 12)
	d.Jobs = append(d.Jobs, Job{ID: "gold", Submit: 1000, Start: 4000, Duration: 1800, GPUs: 1, Tier: auction.Gold,
		MaxPrice: 1_500_000, Kind: KindBatch})
	st, err := RunBaseline(BaselineCentralOnline, s, d, BaselineOptions{Horizon: h})
	if err != nil {
		t.Fatal(err)
	}
	g := ComputeMetrics(s, d, st, h, 0).Gangs
	if g == nil || g.Jobs != 1 || g.Placed != 1 || g.Completed != 1 || g.FillShare != 1 {
		t.Fatalf("gang metrics %+v: want one gang placed and completed, all its work done", g)
	}
	if g.WaitP50Sec != 0 {
		t.Fatalf("wait %d s: the gang started at its submission", g.WaitP50Sec)
	}
	var lost int64
	for _, r := range st.Outcomes[0].Runs {
		if r.Preempted {
			lost += r.Lost
		}
	}
	if lost == 0 || g.PreemptionLostGPUHours != gpuHours(lost) || g.PreemptedPlacements != 1 {
		t.Fatalf("lost %v GPU-h in %d placements, want %v in 1", g.PreemptionLostGPUHours, g.PreemptedPlacements, gpuHours(lost))
	}
	// Without gangs the section is absent, so reports without gangs keep
	// their bytes.
	if m := ComputeMetrics(s, &Demand{Jobs: d.Jobs[1:], Renters: d.Renters}, Strategy{Outcomes: []Outcome{{Job: 0}}}, h, 0); m.Gangs != nil {
		t.Fatalf("gang metrics without gangs: %+v", m.Gangs)
	}
	if at, ok := allRunning([]Run{{Start: 10, End: 50}, {Start: 12, End: 50}, {Start: 11, End: 20}}, 3); !ok || at != 12 {
		t.Fatalf("all running at %d (%v), want 12, the last member's start", at, ok)
	}
	if _, ok := allRunning([]Run{{Start: 10, End: 11}, {Start: 12, End: 50}}, 2); ok {
		t.Fatal("two runs that never overlapped counted as a gang running")
	}
}

func TestGangsWiderThan(t *testing.T) {
	d := &Demand{Jobs: []Job{
		{ID: "a", GPUs: 8, Duration: 10, Tier: auction.Silver},
		{ID: "b", GPUs: 3, Duration: 10, Tier: auction.Bronze},
		{ID: "c", GPUs: 2, Duration: 10, Tier: auction.Silver},
		{ID: "d", GPUs: 8, Duration: 10, Tier: auction.Gold},
	}}
	g, n := GangsWiderThan(d, 2)
	if n != 2 {
		t.Fatalf("%d gangs, want 2", n)
	}
	want := [][2]int{{2, 4}, {1, 3}, {2, 0}, {8, 0}} // gpus, members
	for i, j := range g.Jobs {
		if j.GPUs != want[i][0] || j.Members != want[i][1] || j.Work() != d.Jobs[i].Work() {
			t.Fatalf("job %s: %d GPUs x %d members (work %d), want %v and work %d", j.ID, j.GPUs, j.Members, j.Work(), want[i], d.Jobs[i].Work())
		}
	}
	if d.Jobs[0].Members != 0 {
		t.Fatal("the input demand was changed")
	}
}

func TestGangReturnAfterPreemptionSkipsSiblings(t *testing.T) {
	d := &Demand{Jobs: []Job{{ID: "g", Duration: 100, GPUs: 1, Tier: auction.Bronze, Members: 2}}}
	// Two members preempted at 50, recorded in end order (the second's
	// run began before the first's ended), placed again at 80.
	o := Outcome{Job: 0, Runs: []Run{
		{Start: 0, End: 50, GPUs: 1, Useful: 40, Lost: 10, Preempted: true},
		{Start: 0, End: 50, GPUs: 1, Useful: 40, Lost: 10, Preempted: true},
		{Start: 80, End: 140, GPUs: 1, Useful: 60},
		{Start: 80, End: 140, GPUs: 1, Useful: 60},
	}, Completed: true, Done: 200, Finished: 140}
	m := ComputeMetrics(&Supply{}, d, Strategy{Outcomes: []Outcome{o}}, 1000, 0)
	if all := m.Tiers[0]; all.Returned != 2 || all.ReturnP50Sec != 30 || all.ReturnP95Sec != 30 {
		t.Fatalf("returned %d, p50 %d, p95 %d: want both members back 30 s after the preemption", all.Returned, all.ReturnP50Sec, all.ReturnP95Sec)
	}
}

func TestCheckDemandNamesAGangTooWideForTheSupply(t *testing.T) {
	o := DefaultOptions()
	o.TracesDir = tracesDir(t)
	o.Days = 1
	o.SupplyFile = filepath.Join("testdata", "supply_small.csv")
	o.DemandFile = writeTemp(t, "d.csv", demandHeader+",id,renter,start_s,members\n"+
		"0,600,1,A10,silver,,,batch,fine,0,0,1\n"+
		"0,600,1,A10,silver,,,batch,wide,0,0,2\n")
	_, err := Simulate(o, nil)
	want := "d.csv:3: job wide: members 2: a gang needs as many distinct providers with gpus 1 of model A10 anywhere; the supply has 1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestGangReportSections(t *testing.T) {
	s, d, h := gangWorld(4, 3, auction.Silver, 12)
	st, err := RunBaseline(BaselineCentralOnline, s, d, BaselineOptions{Horizon: h})
	if err != nil {
		t.Fatal(err)
	}
	r := NewReport(map[string]any{}, 1, s, d, []Strategy{st}, 0, 600, h)
	var page bytes.Buffer
	if err := r.WriteHTML(&page, ComputeSeries(s, d, []Strategy{st}, h)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<section id="gangs"><h2>How do gangs fare?`, "gangs / placed / completed", "1 / 1 / 1"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"gangs": {`) || !strings.Contains(js.String(), `"fill_share": 1`) {
		t.Errorf("the JSON report lacks the gangs' figures")
	}
	// A report without gangs has no gangs section.
	r2, series := rpReport(nil)
	page.Reset()
	if err := r2.WriteHTML(&page, series); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), `id="gangs"`) || strings.Contains(string(rpJSON(t, r2)), `"gangs"`) {
		t.Error("a report without gangs shows a gangs section")
	}
}

// --gang-width keeps whole a job whose gang the supply could never hold,
// so that the option never fails a run's demand check.
func TestGangsOfKeepsWholeWhatTheSupplyCannotHold(t *testing.T) {
	s, _, _ := gangWorld(2, 2, auction.Silver, 1)
	d := &Demand{Jobs: []Job{
		{ID: "two", GPUs: 2, Duration: 60, Tier: auction.Silver, Kind: KindBatch},
		{ID: "three", GPUs: 3, Duration: 60, Tier: auction.Silver, Kind: KindBatch},
	}}
	g := gangsOf(d, 1, s)
	if g.Jobs[0].Members != 2 || g.Jobs[0].GPUs != 1 {
		t.Fatalf("job two: %+v, want a gang of 2 x 1 GPU (2 providers hold it)", g.Jobs[0])
	}
	if g.Jobs[1].Members != 0 || g.Jobs[1].GPUs != 3 {
		t.Fatalf("job three: %+v, want it whole (3 members, 2 providers)", g.Jobs[1])
	}
	if note := g.Sources[len(g.Sources)-1]; !strings.Contains(note, "1 silver and bronze jobs wider than 1 GPUs run as gangs") || !strings.Contains(note, "1 kept whole") {
		t.Fatalf("sources note %q", note)
	}
	if gangsOf(d, 0, s) != d {
		t.Fatal("width 0 changed the demand")
	}
}
