package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// smallOptions is a run sized for a test: 40 providers, 30 renters, two
// days of the Alibaba 2023 demand, with a tenth of the providers cheating.
func smallOptions(t testing.TB) Options {
	o := DefaultOptions()
	o.TracesDir = tracesDir(t)
	o.Days = 2
	o.Supply.Providers = 40
	o.Supply.AdversaryShare = map[Behaviour]float64{Skip: 0.05, Abandon: 0.05}
	o.Demand.Renters = 30
	return o
}

func TestSimulateIsDeterministicAndBounded(t *testing.T) {
	o := smallOptions(t)
	a, err := Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ja, jb bytes.Buffer
	if err := a.Report.WriteJSON(&ja); err != nil {
		t.Fatal(err)
	}
	if err := b.Report.WriteJSON(&jb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja.Bytes(), jb.Bytes()) {
		t.Fatal("the same seed gave two different reports")
	}
	bound := a.Report.Bound.GPUSeconds
	if bound <= 0 {
		t.Fatalf("bound %d", bound)
	}
	names := map[string]bool{}
	for _, sr := range a.Report.Strategies {
		names[sr.Name] = true
		useful := sr.Metrics.UsefulGPUHours * 3600
		if useful > float64(bound)+1 {
			t.Errorf("%s filled %.0f useful GPU-s, above the bound %d", sr.Name, useful, bound)
		}
		t.Logf("%-16s useful %.0f GPU-h (%.0f%% of bound) cost share %.2f", sr.Name, sr.Metrics.UsefulGPUHours,
			100*sr.Metrics.UsefulShareOfBound, sr.Metrics.Tiers[0].CostShare)
	}
	for _, n := range append([]string{MarketName}, BaselineNames()...) {
		if !names[n] {
			t.Errorf("no %s in the report", n)
		}
	}
	o.Seed = 2
	c, err := Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	var jc bytes.Buffer
	_ = c.Report.WriteJSON(&jc)
	if bytes.Equal(ja.Bytes(), jc.Bytes()) {
		t.Fatal("another seed gave the same report")
	}
	dir := t.TempDir()
	if err := a.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err != nil || !bytes.Equal(got, ja.Bytes()) {
		t.Fatalf("report.json on disk differs from the report (%v)", err)
	}
	for _, f := range []string{ReportHTML, TimingJSON, SupplyCSV, DemandCSV} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
