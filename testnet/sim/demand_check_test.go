package sim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// writeTemp writes body to a file named name in a test's directory.
func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every bad row is found before anything runs, each named by file:line
// and what is wrong, and the market never starts: a model named twice
// (two cases; a trace's code and its name), a job too long for any
// lease, a job larger than any provider, a model no provider has (a
// trace's code named as such), a model the market's spec refuses.
func TestCheckDemandNamesEveryBadRowBeforeTheRun(t *testing.T) {
	o := DefaultOptions()
	o.TracesDir = tracesDir(t)
	o.Days = 1
	o.SupplyFile = filepath.Join("testdata", "supply_small.csv")
	o.DemandFile = writeTemp(t, "d.csv", demandHeader+"\n"+
		"0,600,1,A10,silver,,,batch\n"+ // line 2: fine
		"0,600,1,A10|a10,silver,,,batch\n"+ // 3
		"0,600,1,A100-SXM4-80GB|A100-80GB,silver,,,batch\n"+ // 4
		"0,3456000,1,A10,silver,,,batch\n"+ // 5: 40 days
		"0,600,2,A10,silver,,,batch\n"+ // 6: the A10 provider has 1 GPU
		"0,600,1,H800,silver,,,batch\n"+ // 7: a trace's code, no provider
		"0,600,1,A10|RTX4O90,silver,,,batch\n"+ // 8: a near miss the spec refuses
		"0,600,2,A10,silver,,,batch\n") // 9: as line 6
	var parts []string
	_, err := Simulate(o, func(s Step) { parts = append(parts, s.Part) })
	if err == nil {
		t.Fatal("bad rows were simulated")
	}
	msg := err.Error()
	for _, want := range []string{
		"d.csv: 7 of 8 jobs cannot run",
		`d.csv:3: job j000001: gpu_models "A10|a10" names A10 twice`,
		`d.csv:4: job j000002: gpu_models "A100-SXM4-80GB|A100-80GB" names A100-80GB twice`,
		"d.csv:5: job j000003: duration_s 3456000 (40d0h0m) is longer than the market can lease",
		"d.csv:6: job j000004: gpus 2: larger than any provider: the most GPUs any provider of model A10 anywhere has is 1 (and 1 more like it: lines 9)",
		"d.csv:7: job j000005: gpu_models: no provider has model H800 (H800 is the trace's code for H800-80GB: name that)",
		`d.csv:8: job j000006: gpu_models: the market refuses the job spec its renter would send: resources.models[1]: "RTX4O90"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "d.csv:2:") {
		t.Errorf("a good row is named:\n%s", msg)
	}
	for _, p := range parts {
		if p != "supply" && p != "demand" {
			t.Errorf("the run went on to %q after bad input", p)
		}
	}
}

// The longest work CheckDemand allows is the longest whose spec the
// market takes: one second more is refused.
func TestCheckDemandLongestWork(t *testing.T) {
	c := newDemandChecker(&Supply{Providers: []Provider{{Model: "A10", GPUs: 1, Country: "DE", Continent: "eu"}}})
	for _, tier := range []auction.Tier{auction.Gold, auction.Silver, auction.Bronze} {
		w := c.longest(tier)
		j := Job{ID: "x", Duration: w, GPUs: 1, Tier: tier, MaxPrice: 1, Kind: KindBatch, Start: 7200}
		if tier != auction.Gold {
			j.Start = 0
		}
		if w < 20*86400 || w > 30*86400 || c.specErr(&j) != nil {
			t.Errorf("%s: longest %d s, or refused", tier, w)
		}
		j.Duration++
		if c.specErr(&j) == nil {
			t.Errorf("%s: %d s, one more than the longest, was taken", tier, j.Duration)
		}
	}
}

// A job that accepts any model is priced by the supply's mix, the median
// on-demand price over the GPU-hours offered by the providers that could
// serve it, not by the cheapest card; and the report says how much of
// the supply each tier's max prices leave out.
func TestAnyModelPricedByTheMixAndPriceReach(t *testing.T) {
	day := []Span{{0, 86400}}
	s := &Supply{
		Providers: []Provider{
			{ID: "t4", Model: "T4", GPUs: 1, Country: "DE", Continent: "eu", Windows: day,
				Floors: auction.Prices{Gold: 80_000, Silver: 60_000, Bronze: 30_000}},
			{ID: "a", Model: "A100", GPUs: 8, Country: "US", Continent: "na", Windows: day,
				Floors: auction.Prices{Gold: 1_600_000, Silver: 1_200_000, Bronze: 700_000}},
			{ID: "b", Model: "A100", GPUs: 8, Country: "US", Continent: "na", Windows: day,
				Floors: auction.Prices{Gold: 1_600_000, Silver: 1_200_000, Bronze: 700_000}},
		},
		OnDemand: map[string]auction.Credits{"T4": 100_000, "A100": 2_000_000},
	}
	d := &Demand{Jobs: []Job{
		{ID: "any", GPUs: 1, Tier: auction.Bronze, Kind: KindBatch, Duration: 60},
		{ID: "any8", GPUs: 8, Tier: auction.Silver, Kind: KindBatch, Duration: 60},
		{ID: "eu", GPUs: 1, Tier: auction.Bronze, Region: "eu", Kind: KindBatch, Duration: 60},
		{ID: "cheap", GPUs: 1, Tier: auction.Bronze, MaxPrice: 50_000, Kind: KindBatch, Duration: 60},
		{ID: "broke", GPUs: 1, Tier: auction.Bronze, MaxPrice: 10_000, Kind: KindBatch, Duration: 60},
	}}
	if err := ResolveDemand(d, s, DemandConfig{Days: 1}); err != nil {
		t.Fatal(err)
	}
	// 1 T4 GPU-day beside 16 A100 GPU-days: the median is the A100's 2
	// credits, where the cheapest card would have given 0.1.
	for i, want := range []auction.Credits{1_000_000, 1_600_000, 50_000, 50_000, 10_000} {
		if got := d.Jobs[i].MaxPrice; got != want {
			t.Errorf("%s: max price %s, want %s", d.Jobs[i].ID, auction.FormatCredits(got), auction.FormatCredits(want))
		}
	}
	reach := PriceReach(s, d, 86400)
	if len(reach) != 3 || reach[0].Tier != "gold" || reach[2].Tier != "bronze" {
		t.Fatalf("reach %+v", reach)
	}
	// Bronze: "any" and "eu" reach everything that fits them; "cheap"
	// reaches only the T4 (1 of 17 GPU-days); "broke" nothing.
	b := reach[2]
	rpNear(t, "bronze excluded", b.ExcludedShare, (0+0+16.0/17+1)/4)
	if b.Jobs != 4 || b.PricedOut != 1 || b.MaxPriceP50 != 0.05 {
		t.Errorf("bronze %+v: want 4 jobs, 1 priced out, median max price 0.05", b)
	}
	if s := reach[1]; s.Jobs != 1 || s.ExcludedShare != 0 || s.PricedOut != 0 {
		t.Errorf("silver %+v", s)
	}
}

// DealRenters hands jobs out in turn, never to more renters than jobs.
func TestDealRenters(t *testing.T) {
	d := &Demand{Jobs: make([]Job, 5)}
	DealRenters(d, 3)
	var got []int
	for _, j := range d.Jobs {
		got = append(got, j.Renter)
	}
	if !reflect.DeepEqual(got, []int{0, 1, 2, 0, 1}) || len(d.Renters) != 3 {
		t.Errorf("renters %v of %d", got, len(d.Renters))
	}
	DealRenters(d, 100)
	if len(d.Renters) != 5 || d.Jobs[4].Renter != 4 {
		t.Errorf("100 renters for 5 jobs: %d renters, last job to %d", len(d.Renters), d.Jobs[4].Renter)
	}
}

// The configuration block is what ran: a demand CSV's run shows no trace,
// load or duration cap, and the renters that submitted jobs; --renters
// deals a CSV without a renter column over that many renters, and a CSV
// with one keeps its own, which the report says.
func TestConfigIsWhatRanForADemandCSV(t *testing.T) {
	o := DefaultOptions()
	o.TracesDir = tracesDir(t)
	o.Days = 0.1
	o.Baselines = []string{BaselineFirstFit}
	o.SupplyFile = filepath.Join("testdata", "supply_small.csv")
	rows := strings.Repeat("60,600,1,A100-80GB,silver,,,batch\n", 12)
	o.Demand.Renters = 5
	o.DemandFile = writeTemp(t, "d.csv", demandHeader+"\n"+rows)
	res, err := Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := res.Ran
	if ran.DemandTrace != "" || ran.Demand.Load != 0 || ran.Demand.MaxDuration != 0 || ran.Demand.Renters != 5 ||
		ran.Demand.RentersFrom != RentersDealt || ran.Supply.Providers != 2 || ran.Supply.Availability != "" {
		t.Errorf("ran %+v", ran)
	}
	if res.Report.Demand.Renters != 5 {
		t.Errorf("%d renters submitted jobs, want 5", res.Report.Demand.Renters)
	}
	var js strings.Builder
	if err := res.Report.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{`"demand_trace"`, `"load"`, `"maxduration"`, `"availability"`} {
		if strings.Contains(js.String(), absent) {
			t.Errorf("report.json shows %s, which this run did not use", absent)
		}
	}
	if !strings.Contains(js.String(), `"renters_from": "dealt"`) || !strings.Contains(strings.Join(res.Report.Notes, "\n"), "dealt in turn") {
		t.Error("the report does not say the jobs were dealt over the renters")
	}

	// With a renter column, the column decides.
	o.DemandFile = writeTemp(t, "d.csv", demandHeader+",id,renter\n60,600,1,A100-80GB,silver,,,batch,a,7\n70,600,1,A100-80GB,silver,,,batch,b,7\n")
	res, err = Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran.Demand.RentersFrom != RentersColumn || res.Report.Demand.Renters != 1 ||
		!strings.Contains(strings.Join(res.Report.Notes, "\n"), "the renter column of") {
		t.Errorf("renters from %q, %d renters, notes %q", res.Ran.Demand.RentersFrom, res.Report.Demand.Renters, res.Report.Notes)
	}
}
