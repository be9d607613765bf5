package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Job arrays from the CLI (issue 36): a demand CSV with the shards and
// max_parallel columns runs each array's shards, --json carries every
// strategy's array figures, the text summary has the ARRAYS table, and
// the demand.csv written holds the array as its row again.
func TestSimArraysFromTheCLI(t *testing.T) {
	traces := tracesFor(t)
	dir := t.TempDir()
	demand := filepath.Join(dir, "d.csv")
	os.WriteFile(demand, []byte("submit_s,duration_s,gpus,gpu_models,tier,max_price,region,kind,id,renter,start_s,members,shards,max_parallel\n"+
		"600,1800,1,,silver,,,batch,arr,0,0,1,6,2\n"+
		"900,1800,1,,bronze,,,batch,solo,1,0,1,1,0\n"), 0o644)
	out := t.TempDir()
	r := gleaner(t, "sim", "--providers", "30", "--demand", demand, "--days", "0.25", "--baselines", "central-online",
		"--traces", traces, "--out", out, "--json")
	mustOK(t, r, "gleaner sim --demand (with an array) --json")
	var j struct {
		Report struct {
			Strategies []struct {
				Name    string `json:"name"`
				Metrics struct {
					Arrays *struct {
						Arrays    int `json:"arrays"`
						Shards    int `json:"shards"`
						Completed int `json:"completed"`
					} `json:"arrays"`
				} `json:"metrics"`
			} `json:"strategies"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("--json: %v", err)
	}
	for _, st := range j.Report.Strategies {
		if a := st.Metrics.Arrays; a == nil || a.Arrays != 1 || a.Shards != 6 || a.Completed != 1 {
			t.Errorf("%s: array figures %+v, want 1 array of 6 shards, completed", st.Name, a)
		}
	}
	csv, err := os.ReadFile(filepath.Join(out, "demand.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(csv), ",shards,max_parallel\n") || !strings.Contains(string(csv), ",arr,0,0,1,6,2\n") {
		t.Fatalf("demand.csv does not hold the array as its row:\n%s", csv)
	}
	r = gleaner(t, "sim", "--providers", "30", "--demand", demand, "--days", "0.25", "--baselines", "central-online",
		"--traces", traces, "--out", t.TempDir())
	mustOK(t, r, "gleaner sim --demand (with an array)")
	if !strings.Contains(r.stdout, "ARRAYS:") {
		t.Errorf("the summary lacks the ARRAYS table:\n%s", r.stdout)
	}
	// --array-split turns the sampled trace's long batch jobs into arrays.
	out = t.TempDir()
	r = gleaner(t, "sim", "--providers", "30", "--renters", "10", "--days", "1", "--array-split", "8", "--array-parallel", "4",
		"--baselines", "central-online", "--traces", traces, "--out", out)
	mustOK(t, r, "gleaner sim --array-split 8 --array-parallel 4")
	if !strings.Contains(r.stdout, "ARRAYS:") {
		t.Errorf("--array-split: the summary lacks the ARRAYS table:\n%s", r.stdout)
	}
	if csv, err := os.ReadFile(filepath.Join(out, "demand.csv")); err != nil || !strings.Contains(string(csv), ",1,8,4\n") {
		t.Errorf("--array-split: demand.csv lacks an array of 8 shards, 4 at once (%v):\n%.2000s", err, csv)
	}
}
