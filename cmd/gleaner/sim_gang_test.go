package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Gangs from the CLI (issue 36): --gang-width turns the wide jobs into
// gangs, --json carries every strategy's gang figures, the demand.csv
// written holds them in its members column, and fed back in it gives
// the text summary's GANGS table.
func TestSimGangsFromTheCLI(t *testing.T) {
	traces := tracesFor(t)
	out := t.TempDir()
	r := gleaner(t, "sim", "--providers", "30", "--renters", "10", "--days", "0.25", "--gang-width", "2",
		"--baselines", "central-online", "--traces", traces, "--out", out, "--json")
	mustOK(t, r, "gleaner sim --gang-width 2 --json")
	var j struct {
		Report struct {
			Strategies []struct {
				Name    string `json:"name"`
				Metrics struct {
					Gangs *struct {
						Jobs   int `json:"jobs"`
						Placed int `json:"placed"`
					} `json:"gangs"`
				} `json:"metrics"`
			} `json:"strategies"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("--json: %v", err)
	}
	if len(j.Report.Strategies) != 2 {
		t.Fatalf("%d strategies, want the market and central-online", len(j.Report.Strategies))
	}
	for _, st := range j.Report.Strategies {
		if g := st.Metrics.Gangs; g == nil || g.Jobs == 0 {
			t.Errorf("%s: no gang figures in --json", st.Name)
		}
	}
	csv, err := os.ReadFile(filepath.Join(out, "demand.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(csv), "\n"); !strings.HasSuffix(first, ",start_s,members") {
		t.Fatalf("demand.csv header %q lacks the members column", first)
	}
	r = gleaner(t, "sim", "--supply", filepath.Join(out, "supply.csv"), "--demand", filepath.Join(out, "demand.csv"),
		"--days", "0.25", "--baselines", "central-online", "--traces", traces, "--out", t.TempDir())
	mustOK(t, r, "gleaner sim --demand (with gangs)")
	if !strings.Contains(r.stdout, "GANGS:") || !strings.Contains(r.stdout, "central-online") {
		t.Errorf("the summary lacks the GANGS table:\n%s", r.stdout)
	}
}
