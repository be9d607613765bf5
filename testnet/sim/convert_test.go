package sim

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// rawRows reads a trace as maps, column name to value, for tests that
// recount what the converters should keep.
func rawRows(t *testing.T, path string) []map[string]string {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func num(t *testing.T, s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}

// checkConverted: sorted, rebased to 0, positive durations, whole GPUs.
func checkConverted(t *testing.T, d *Demand) {
	t.Helper()
	if len(d.Jobs) == 0 || d.Jobs[0].Submit != 0 || len(d.Sources) == 0 {
		t.Fatalf("%d jobs, first submit %v, sources %q", len(d.Jobs), d.Jobs, d.Sources)
	}
	for i, j := range d.Jobs {
		if j.Duration <= 0 || j.GPUs < 1 || j.GPUs > 8 || i > 0 && j.Submit < d.Jobs[i-1].Submit {
			t.Fatalf("job %d %+v: not positive, whole GPUs, in order", i, j)
		}
	}
	if err := WriteDemandCSV(&bytes.Buffer{}, d); err != nil {
		t.Errorf("a converted demand does not fit the canonical CSV: %v", err)
	}
}

func TestConvertAlibaba2023(t *testing.T) {
	path := filepath.Join(tracesDir(t), pods2023File)
	d, err := ConvertAlibaba2023(path, ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkConverted(t, d)
	want := map[string]auction.Tier{} // recounted from the raw rows
	qos := map[string]auction.Tier{"Guaranteed": auction.Gold, "LS": auction.Silver, "Burstable": auction.Silver, "BE": auction.Bronze}
	for _, r := range rawRows(t, path) {
		if num(t, r["num_gpu"]) >= 1 && r["scheduled_time"] != "" && num(t, r["deletion_time"]) > num(t, r["scheduled_time"]) {
			want[r["name"]] = qos[r["qos"]]
		}
	}
	if len(d.Jobs) != len(want) {
		t.Errorf("%d jobs, the trace has %d GPU pods scheduled with positive durations", len(d.Jobs), len(want))
	}
	tiers := map[auction.Tier]int{}
	for _, j := range d.Jobs {
		tiers[j.Tier]++
		if w, ok := want[j.ID]; !ok || w != j.Tier {
			t.Fatalf("%s: tier %s, its qos says %q", j.ID, j.Tier, w)
		}
	}
	if tiers[auction.Silver] == 0 || tiers[auction.Bronze] == 0 {
		t.Errorf("tiers %v: the trace has both LS and BE pods", tiers)
	}
	// A bounded subset is a seeded draw, still sorted and rebased.
	a, err1 := ConvertAlibaba2023(path, ConvertOptions{MaxJobs: 100, Seed: 1})
	b, err2 := ConvertAlibaba2023(path, ConvertOptions{MaxJobs: 100, Seed: 1})
	c, err3 := ConvertAlibaba2023(path, ConvertOptions{MaxJobs: 100, Seed: 2})
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(err1, err2, err3)
	}
	checkConverted(t, a)
	if len(a.Jobs) != 100 || !reflect.DeepEqual(a, b) || reflect.DeepEqual(a.Jobs, c.Jobs) {
		t.Errorf("subset: %d jobs, same seed equal %v, other seed equal %v", len(a.Jobs), reflect.DeepEqual(a, b), reflect.DeepEqual(a.Jobs, c.Jobs))
	}
}

func TestConvertAlibaba2025(t *testing.T) {
	path := filepath.Join(tracesDir(t), dlrm2025File)
	d, err := ConvertAlibaba2025(path, ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkConverted(t, d)
	want := 0
	for _, r := range rawRows(t, path) {
		if num(t, r["gpu_request"]) >= 1 && r["scheduled_time"] != "" && r["deletion_time"] != "" &&
			num(t, r["deletion_time"]) > num(t, r["scheduled_time"]) {
			want++
		}
	}
	if len(d.Jobs) != want {
		t.Errorf("%d jobs, the trace has %d GPU instances with known positive lifetimes", len(d.Jobs), want)
	}
	for _, j := range d.Jobs {
		if j.Tier != auction.Silver || j.Kind != KindServing || j.Models != nil {
			t.Fatalf("%+v: want silver serving on any model", j)
		}
	}
}

func TestMapModels(t *testing.T) {
	got, err := mapModels("V100M16|G3|V100M32|NEW-1")
	if want := []string{"V100-16GB", "V100-32GB", "NEW-1"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%q, %v; want %q (G3's stand-in is V100-32GB, named once; unknown codes kept)", got, err, want)
	}
	if _, err := mapModels("A10|bad code"); err == nil {
		t.Error("a code with a space accepted")
	}
}
