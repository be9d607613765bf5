package sim

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// tracesDir is a directory holding the built-in real traces.
func tracesDir(t testing.TB) string {
	t.Helper()
	dir, err := TraceDir("")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// nodeShapes is every "model/gpus" the node lists hold, read here
// without BuildSupply's code.
func nodeShapes(t *testing.T, dir string) map[string]bool {
	out := map[string]bool{}
	for _, f := range []struct{ file, model, count string }{
		{nodes2023File, "model", "gpu"}, {nodes2026File, "gpu_model", "gpu_capacity_num"},
	} {
		raw, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		col := map[string]int{}
		for i, h := range recs[0] {
			col[h] = i
		}
		for _, r := range recs[1:] {
			out[modelTable[r[col[f.model]]].Name+"/"+r[col[f.count]]] = true
		}
	}
	return out
}

func TestBuildSupplyFromTraces(t *testing.T) {
	dir := tracesDir(t)
	cfg := DefaultSupplyConfig()
	cfg.TracesDir, cfg.Providers, cfg.Days = dir, 300, 14
	s, err := BuildSupply(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shapes := nodeShapes(t, dir)
	horizon := int64(cfg.Days * 86400)
	models := map[string]bool{}
	for _, p := range s.Providers {
		models[p.Model] = true
		if !shapes[fmt.Sprintf("%s/%d", p.Model, p.GPUs)] {
			t.Errorf("%s: %s with %d GPUs is no node of the lists", p.ID, p.Model, p.GPUs)
		}
		if p.VRAMMiB < 16384 || len(p.Country) != 2 || !regionOK(p.Continent) || p.Continent != strings.ToLower(p.Continent) {
			t.Errorf("%s: vram %d, country %q, continent %q", p.ID, p.VRAMMiB, p.Country, p.Continent)
		}
		if !(0 < p.Floors.Bronze && p.Floors.Bronze < p.Floors.Silver && p.Floors.Silver < p.Floors.Gold) {
			t.Errorf("%s: floors %+v not bronze < silver < gold", p.ID, p.Floors)
		}
		if od := s.OnDemand[p.Model]; od <= p.Floors.Bronze {
			t.Errorf("%s: on-demand %d not above the bronze floor %d", p.ID, od, p.Floors.Bronze)
		}
		var prevEnd int64 = -1
		for _, w := range p.Windows {
			if w.Start < 0 || w.End > horizon || w.Len() < minWindow || w.Start <= prevEnd {
				t.Fatalf("%s: window %+v outside [0,%d), under %d s, or not after %d", p.ID, w, horizon, minWindow, prevEnd)
			}
			prevEnd = w.End
		}
	}
	if len(models) < 4 {
		t.Errorf("only models %v in 300 providers drawn from both lists", models)
	}
	for m := range models {
		if s.OnDemand[m] <= 0 {
			t.Errorf("no on-demand price for %s", m)
		}
	}
	joined := strings.Join(s.Sources, "\n")
	for _, f := range []string{nodes2023File, nodes2026File, priceListFile, availFitsFile, "stand-in"} {
		if !strings.Contains(joined, f) {
			t.Errorf("sources do not name %s:\n%s", f, joined)
		}
	}
}

func TestBuildSupplyDeterministic(t *testing.T) {
	cfg := DefaultSupplyConfig()
	cfg.TracesDir, cfg.Providers, cfg.Days = tracesDir(t), 50, 7
	a, err1 := BuildSupply(cfg)
	b, err2 := BuildSupply(cfg)
	cfg.Seed++
	c, err3 := BuildSupply(cfg)
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(err1, err2, err3)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave different supplies")
	}
	if reflect.DeepEqual(a.Providers, c.Providers) {
		t.Error("another seed gave the same providers")
	}
}

// The corporate desktops stay up for days, the Condor pool for hours: the
// share of time offered should be near each fit's up/(up+down) and the
// Condor pool should offer many more, shorter windows.
func TestBuildSupplyAvailabilityTraces(t *testing.T) {
	dir := tracesDir(t)
	for _, fit := range []string{FitWeibull, FitLognormal, FitGamma, FitExponential} {
		fits, err := loadAvailability(dir, fit)
		if err != nil {
			t.Fatal(err)
		}
		windowsPerDay := map[string]float64{}
		for _, trace := range []string{TraceMicrosoft99, TraceNd07cpu} {
			cfg := DefaultSupplyConfig()
			cfg.TracesDir, cfg.Providers, cfg.Days, cfg.Availability, cfg.Fit = dir, 400, 60, trace, fit
			s, err := BuildSupply(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var up int64
			n := 0
			for _, p := range s.Providers {
				n += len(p.Windows)
				for _, w := range p.Windows {
					up += w.Len()
				}
			}
			share := float64(up) / (float64(len(s.Providers)) * cfg.Days * 86400)
			f := fits[trace]
			want := f.up.mean() / (f.up.mean() + f.down.mean())
			windowsPerDay[trace] = float64(n) / (float64(len(s.Providers)) * cfg.Days)
			t.Logf("%s %s: %.3f offered (fit %.3f), %.2f windows per provider-day", fit, trace, share, want, windowsPerDay[trace])
			if share < want-0.08 || share > want+0.05 {
				t.Errorf("%s %s: %.3f of provider-hours offered, fit says %.3f", fit, trace, share, want)
			}
		}
		if windowsPerDay[TraceNd07cpu] < 3*windowsPerDay[TraceMicrosoft99] {
			t.Errorf("%s: windows per provider-day %v; the Condor pool should churn far more", fit, windowsPerDay)
		}
	}
}

func TestBuildSupplyAlwaysAndAdversaries(t *testing.T) {
	cfg := DefaultSupplyConfig()
	cfg.TracesDir, cfg.Providers, cfg.Days, cfg.Availability = tracesDir(t), 40, 2, AvailAlways
	cfg.AdversaryShare = map[Behaviour]float64{Skip: 0.25, Refuse: 0.1}
	s, err := BuildSupply(cfg)
	if err != nil {
		t.Fatal(err)
	}
	count := map[Behaviour]int{}
	for _, p := range s.Providers {
		count[p.Behaviour]++
		if len(p.Windows) != 1 || p.Windows[0] != (Span{0, 2 * 86400}) {
			t.Fatalf("%s: windows %v, want the whole horizon", p.ID, p.Windows)
		}
	}
	if count[Skip] != 10 || count[Refuse] != 4 || count[Honest] != 26 {
		t.Errorf("behaviours %v, want 10 skip, 4 refuse of 40", count)
	}
	cfg.AdversaryShare = map[Behaviour]float64{NonPayer: 0.1}
	if _, err := BuildSupply(cfg); err == nil || !strings.Contains(err.Error(), "nonpayer") {
		t.Errorf("a renter behaviour for providers: %v", err)
	}
}

func TestReadPriceListMedians(t *testing.T) {
	pl, err := readPriceList(filepath.Join("testdata", "traces"))
	if err != nil {
		t.Fatal(err)
	}
	// H100 per GPU 1.80, 2.00, 2.10: the middle one; A100 1.00 and 0.50:
	// their mean.
	if pl.PerGPU["H100"] != 2_000_000 || pl.PerGPU["A100"] != 750_000 {
		t.Errorf("medians %v", pl.PerGPU)
	}
	want := []location{{"CZ", "eu"}, {"US", "na"}, {"US", "na"}, {"DE", "eu"}, {"TW", "as"}}
	if !reflect.DeepEqual(pl.Locations, want) {
		t.Errorf("locations %v, want %v", pl.Locations, want)
	}
	od, err := OnDemandPrices(tracesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modelTable {
		if od[m.Name] != od[m.PriceAs] || od[m.Name] <= 0 {
			t.Errorf("%s priced %d, its equivalent %s %d", m.Name, od[m.Name], m.PriceAs, od[m.PriceAs])
		}
	}
}

func TestFloorsRoundOnceAndOrder(t *testing.T) {
	cfg := DefaultSupplyConfig()
	p := floors(1_000_000, cfg, 0) // no noise: 60% of 1 credit, then 130% and 60% of that
	if p != (auction.Prices{Gold: 780_000, Silver: 600_000, Bronze: 360_000}) {
		t.Errorf("floors %+v", p)
	}
	if q := floors(1, cfg, 0); !(0 < q.Bronze && q.Bronze < q.Silver && q.Silver < q.Gold) {
		t.Errorf("a tiny price gave unordered floors %+v", q)
	}
}

func TestSupplyCSVRoundTrip(t *testing.T) {
	cfg := DefaultSupplyConfig()
	cfg.TracesDir, cfg.Providers, cfg.Days = tracesDir(t), 60, 7
	s, err := BuildSupply(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSupplyCSV(&buf, s); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "supply.csv")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	od, err := OnDemandPrices(cfg.TracesDir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadSupplyCSV(path, od)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Providers, s.Providers) || !reflect.DeepEqual(back.OnDemand, s.OnDemand) {
		t.Errorf("round trip changed the supply")
	}
}

func TestLoadSupplyCSVFixture(t *testing.T) {
	s, err := LoadSupplyCSV(filepath.Join("testdata", "supply_small.csv"), map[string]auction.Credits{"A100-80GB": 734375, "A10": 255000, "H100": 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []Provider{
		{ID: "p00000", Model: "A100-80GB", VRAMMiB: 81920, GPUs: 8, Country: "DE", Continent: "eu",
			Floors: auction.Prices{Gold: 1_300_000, Silver: 1_000_000, Bronze: 600_000}, Windows: []Span{{0, 3600}, {7200, 86400}}},
		{ID: "p00001", Model: "A10", VRAMMiB: 24576, GPUs: 1, Country: "US", Continent: "na",
			Floors: auction.Prices{Gold: 200_000, Silver: 150_000}},
	}
	if !reflect.DeepEqual(s.Providers, want) {
		t.Errorf("providers\n%+v\nwant\n%+v", s.Providers, want)
	}
	if len(s.OnDemand) != 2 || s.OnDemand["A10"] != 255000 {
		t.Errorf("on-demand %v: want only the models used", s.OnDemand)
	}
}

func TestLoadSupplyCSVErrors(t *testing.T) {
	od := map[string]auction.Credits{"A10": 255000}
	row := "p1,A10,24576,1,US,na,0.2,0.15,0.1,0-3600"
	for _, c := range []struct{ body, want string }{
		{"id,model\n", `:1: header "id,model", expected "` + supplyHeader + `"`},
		{supplyHeader + "\n" + row + "\np2,T4,16384,1,US,na,0.2,0.15,0.1,\n", `:3:2: model: "T4" has no on-demand price in the price list`},
		{supplyHeader + "\np1,A10,24576,9,US,na,0.2,0.15,0.1,\n", `:2:4: gpus: "9" is not a whole number 1..8`},
		{supplyHeader + "\np1,A10,24576,1,us,na,0.2,0.15,0.1,\n", `:2:5: country: "us" is not an upper-case ISO country`},
		{supplyHeader + "\np1,A10,24576,1,US,NA,0.2,0.15,0.1,\n", `:2:6: continent: "NA" is not a continent`},
		{supplyHeader + "\np1,A10,24576,1,US,na,0.2,0.1500001,0.1,\n", `:2:8: floor_silver: "0.1500001" is not credits`},
		{supplyHeader + "\np1,A10,24576,1,US,na,0.2,0.15,0.1,0-3600;3000-4000\n", `:2:10: windows: "3000-4000" overlaps`},
		{supplyHeader + "\np1,A10,24576,1,US,na,0.2,0.15,0.1,5-5\n", `:2:10: windows: "5-5" is not start-end seconds with start < end`},
		{supplyHeader + "\n" + row + "\n" + row + "\n", `:3:1: id: "p1" appears twice`},
		{supplyHeader + "\np1,A10\n", `:2: 2 fields, expected 10`},
	} {
		path := filepath.Join(t.TempDir(), "s.csv")
		if err := os.WriteFile(path, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSupplyCSV(path, od)
		if err == nil || !strings.HasPrefix(err.Error(), path+c.want) {
			t.Errorf("%q:\n got %v\nwant %s%s", c.body, err, path, c.want)
		}
	}
}

func TestCheckFeasible(t *testing.T) {
	s := &Supply{Providers: []Provider{
		{ID: "a", Model: "A10", GPUs: 4, Country: "DE", Continent: "eu"},
		{ID: "b", Model: "A100-80GB", GPUs: 8, Country: "US", Continent: "na"},
	}}
	job := func(id string, gpus int, region string, models ...string) Job {
		return Job{ID: id, GPUs: gpus, Region: region, Models: models, Tier: auction.Silver}
	}
	ok := &Demand{Jobs: []Job{job("j0", 4, "eu", "A10"), job("j1", 8, "", ""), job("j2", 8, "US", "T4", "A100-80GB")}}
	ok.Jobs[1].Models = nil
	if err := CheckFeasible(s, ok); err != nil {
		t.Errorf("a feasible demand: %v", err)
	}
	bad := &Demand{Jobs: []Job{
		job("j0", 1, "", "A10"),
		job("j1", 1, "", "H100"), job("j2", 1, "", "H100"),
		job("j3", 1, "as", "A10"),
		job("j4", 8, "eu", "A10"), job("j5", 6, "DE", "A10"),
		job("j6", 1, "na", "A10"),
	}}
	err := CheckFeasible(s, bad)
	want := "impossible for this supply:" +
		"\n  no provider has model H100: 2 jobs ask for it (first j1)" +
		"\n  no provider is in region \"as\": 1 jobs ask for it (first j3)" +
		"\n  8 GPUs of model A10 wanted in region \"eu\" but the most any such provider has is 4: 1 jobs ask for it (first j4)" +
		"\n  6 GPUs of model A10 wanted in region \"DE\" but the most any such provider has is 4: 1 jobs ask for it (first j5)" +
		"\n  no provider has model A10 in region \"na\": 1 jobs ask for it (first j6)"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}
