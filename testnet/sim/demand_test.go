package sim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestReadDemandCSVErrors(t *testing.T) {
	h, h11 := demandHeader+"\n", demandHeader+",id,renter,start_s\n"
	h12 := demandHeader + ",id,renter,start_s,members\n"
	good := "0,60,1,,silver,,,batch\n"
	expect := fmt.Sprintf("expected %q optionally followed by %s", demandHeader, demandTrailer)
	for _, c := range []struct{ body, want string }{
		{h + "0,60,x,,silver,,,batch\n", `d.csv:2:3: gpus: "x" is not a whole number 1..8`},
		{h + strings.Repeat(good, 15) + "0,60,9,,silver,,,batch\n", `d.csv:17:3: gpus: "9" is not a whole number 1..8`},
		{h + "\n" + good + "\n0,60,1,,platinum,,,batch\n", `d.csv:5:5: tier: "platinum" is not gold, silver or bronze`},
		{h + "-5,60,1,,silver,,,batch\n", `d.csv:2:1: submit_s: "-5" is not a whole number 0..315360000`},
		{h + "0,0,1,,silver,,,batch\n", `d.csv:2:2: duration_s: "0" is not a whole number 1..315360000`},
		{h + "0,60,1,A10||T4,silver,,,batch\n", `d.csv:2:4: gpu_models: "A10||T4" is not models separated by |`},
		{h + "0,60,1,,silver,1.2345678,,batch\n", `d.csv:2:6: max_price: "1.2345678" is not credits 0..1000000 with at most 6 decimals`},
		{h + "0,60,1,,silver,-1,,batch\n", `d.csv:2:6: max_price: "-1" is not credits`},
		{h + "0,60,1,,silver,,Europe,batch\n", `d.csv:2:7: region: "Europe" is not empty, a continent`},
		{h + "0,60,1,,silver,,,web\n", `d.csv:2:8: kind: "web" is not training, batch, inference or serving`},
		{h11 + "0,60,1,,silver,,,batch,a b,0,0\n", `d.csv:2:9: id: "a b" is not a name`},
		{h11 + "0,60,1,,silver,,,batch,j,abc,0\n", `d.csv:2:10: renter: "abc" is not a whole number 0..999999`},
		{h11 + "0,60,1,,silver,,,batch,j,0,100\n", `d.csv:2:11: start_s: "100": only gold jobs have a start (0 for silver)`},
		{h11 + "500,60,1,,gold,,,batch,j,0,100\n", `d.csv:2:11: start_s: "100" is before submit_s 500`},
		{h12 + "0,60,1,,silver,,,batch,j,0,0,9\n", `d.csv:2:12: members: "9" is not a whole number 1..8 (1: not a gang)`},
		{h12 + "0,60,1,,silver,,,batch,j,0,0,0\n", `d.csv:2:12: members: "0" is not a whole number 1..8`},
		{h12 + "0,60,1,,silver,,,batch,j,0,0,two\n", `d.csv:2:12: members: "two" is not a whole number 1..8`},
		{h12 + "500,60,1,,gold,,,batch,j,0,600,2\n", `d.csv:2:12: members: "2": a gang is silver or bronze`},
		{h12 + "0,60,1,,silver,,,batch,j,0,0\n", `d.csv:2: 11 fields, expected 12 (` + demandHeader + ",id,renter,start_s,members" + `)`},
		{h + "0,60,1,,silver,,batch\n", `d.csv:2: 7 fields, expected 8 (` + demandHeader + `)`},
		{h11 + "0,60,1,,silver,,,batch," + strings.Repeat("a", 1025) + ",0,0\n", `d.csv:2:9: id: longer than 1024 bytes`},
		{h + good + strings.Repeat("1", 20000) + "\n", `d.csv:3: a record longer than 16384 bytes`},
		{h + "0,60,1,a\"b,silver,,,batch\n", `d.csv:2:9: bare "`},
		{"submit,duration\n", `d.csv:1: header "submit,duration", ` + expect},
		{demandHeader + ",renter\n", `d.csv:1: header "` + demandHeader + `,renter", ` + expect},
		{"", `d.csv: empty, ` + expect},
	} {
		_, err := ReadDemandCSV(strings.NewReader(c.body), "d.csv")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			body := c.body
			if len(body) > 120 {
				body = body[:120] + "..."
			}
			t.Errorf("%q:\n got %v\nwant %s", body, err, c.want)
		}
	}
}

func TestLoadDemandCSVFixture(t *testing.T) {
	d, err := LoadDemandCSV(filepath.Join("testdata", "demand_small.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{ // sorted by submit, the two at 300 in file order
		{ID: "early", Submit: 0, Duration: 600, GPUs: 1, Tier: auction.Bronze, Kind: KindBatch},
		{ID: "late", Submit: 300, Duration: 3600, GPUs: 2, Models: []string{"A100-80GB", "H800-80GB"}, Tier: auction.Silver,
			MaxPrice: 1_250_000, Region: "eu", Kind: KindTraining, Renter: 3},
		{ID: "late2", Submit: 300, Duration: 7200, GPUs: 8, Models: []string{"A10"}, Tier: auction.Gold, Region: "DE",
			Kind: KindServing, Renter: 1},
	}
	if !reflect.DeepEqual(d.Jobs, want) {
		t.Errorf("jobs\n%+v\nwant\n%+v", d.Jobs, want)
	}
	if len(d.Renters) != 4 {
		t.Errorf("%d renters, want 4 (renter 3 named)", len(d.Renters))
	}
	// Without the id column, jobs are named in file order.
	d, err = ReadDemandCSV(strings.NewReader(demandHeader+"\n9,60,1,,silver,,,batch\n5,60,1,,silver,,,batch\n"), "x")
	if err != nil || d.Jobs[0].ID != "j000001" || d.Jobs[1].ID != "j000000" || len(d.Renters) != 1 {
		t.Errorf("generated ids: %+v, %v", d, err)
	}
}

// randomJobs are jobs of every shape the CSV can hold.
func randomJobs(seed uint64, n int) []Job {
	r := rand.New(rand.NewPCG(seed, 0))
	tiers := []auction.Tier{auction.Gold, auction.Silver, auction.Bronze}
	kinds := []string{KindTraining, KindBatch, KindInference, KindServing}
	regions := []string{"", "eu", "na", "DE", "US"}
	models := []string{"A10", "A100-80GB", "H800-80GB", "RTX6000-Ada", "x.y_z+1"}
	var jobs []Job
	var submit int64
	for i := 0; i < n; i++ {
		submit += r.Int64N(100)
		j := Job{ID: fmt.Sprintf("job-%d", i), Submit: submit, Duration: 1 + r.Int64N(86400), GPUs: 1 + r.IntN(8),
			Tier: tiers[r.IntN(3)], MaxPrice: auction.Credits(r.Int64N(5_000_000)), Region: regions[r.IntN(len(regions))],
			Kind: kinds[r.IntN(4)], Renter: r.IntN(50)}
		for k := r.IntN(3); k > 0; k-- {
			j.Models = append(j.Models, models[r.IntN(len(models))])
		}
		if j.Tier == auction.Gold && r.IntN(2) == 0 {
			j.Start = j.Submit + r.Int64N(10000)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

func TestDemandCSVRoundTrip(t *testing.T) {
	d := &Demand{Jobs: randomJobs(3, 500)}
	var buf bytes.Buffer
	if err := WriteDemandCSV(&buf, d); err != nil {
		t.Fatal(err)
	}
	back, err := ReadDemandCSV(bytes.NewReader(buf.Bytes()), "rt.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Jobs, d.Jobs) {
		for i := range d.Jobs {
			if !reflect.DeepEqual(back.Jobs[i], d.Jobs[i]) {
				t.Fatalf("job %d: wrote %+v, read %+v", i, d.Jobs[i], back.Jobs[i])
			}
		}
	}
	var again bytes.Buffer
	if err := WriteDemandCSV(&again, back); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Errorf("writing what was read gave other bytes (%v)", err)
	}
	// A job the CSV cannot hold is refused, not written wrong.
	for _, j := range []Job{
		{ID: "a,b", Duration: 1, GPUs: 1, Tier: auction.Silver, Kind: KindBatch},
		{ID: "m", Duration: 1, GPUs: 1, Tier: auction.Silver, Kind: KindBatch, Models: []string{""}},
		{ID: "g", Duration: 1, GPUs: 9, Tier: auction.Silver, Kind: KindBatch},
	} {
		if err := WriteDemandCSV(&bytes.Buffer{}, &Demand{Jobs: []Job{j}}); err == nil {
			t.Errorf("wrote %+v", j)
		}
	}
}

func TestSampleDemandLoadFromTraces(t *testing.T) {
	dir := tracesDir(t)
	sc := DefaultSupplyConfig()
	sc.TracesDir, sc.Providers, sc.Days = dir, 80, 7
	s, err := BuildSupply(sc)
	if err != nil {
		t.Fatal(err)
	}
	base, err := ConvertAlibaba2023(filepath.Join(dir, pods2023File), ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultDemandConfig()
	cfg.Days, cfg.Load, cfg.Renters, cfg.NonPayerShare = 7, 0.6, 40, 0.25
	d, err := SampleDemand(base, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	horizon := int64(cfg.Days * 86400)
	var offered, demanded float64
	cheapest := auction.Credits(1 << 62)
	for _, p := range s.Providers {
		cheapest = min(cheapest, s.OnDemand[p.Model])
		for _, w := range p.Windows {
			offered += float64(w.Len() * int64(p.GPUs))
		}
	}
	bp := map[auction.Tier]auction.Credits{auction.Gold: 10000, auction.Silver: 8000, auction.Bronze: 5000}
	for i, j := range d.Jobs {
		demanded += float64(j.Duration * int64(j.GPUs))
		switch {
		case j.Submit < 0 || j.Submit >= horizon || i > 0 && j.Submit < d.Jobs[i-1].Submit:
			t.Fatalf("job %d submit %d outside [0,%d) or out of order", i, j.Submit, horizon)
		case j.Duration < 1 || j.Duration > cfg.MaxDuration || j.Renter < 0 || j.Renter >= cfg.Renters:
			t.Fatalf("job %d: duration %d, renter %d", i, j.Duration, j.Renter)
		case j.Tier == auction.Gold && j.Start != j.Submit+cfg.GoldLead, j.Tier != auction.Gold && j.Start != 0:
			t.Fatalf("job %d %s: start %d, submit %d", i, j.Tier, j.Start, j.Submit)
		case len(j.Models) == 0 && j.MaxPrice < cheapest*bp[j.Tier]/10000:
			// Any model: the tier's share of the supply's median, at
			// least that of the cheapest card.
			t.Fatalf("job %d %s: max price %d, under %d bp of the cheapest %d", i, j.Tier, j.MaxPrice, bp[j.Tier], cheapest)
		}
	}
	if ratio := demanded / offered; ratio < 0.95*cfg.Load || ratio > 1.05*cfg.Load {
		t.Errorf("load %.4f, want %.2f within 5%%", ratio, cfg.Load)
	}
	if len(d.Renters) != 40 || countBehaviour(d.Renters, NonPayer) != 10 {
		t.Errorf("%d renters, %d non-payers; want 40 and 10", len(d.Renters), countBehaviour(d.Renters, NonPayer))
	}
	if err := CheckFeasible(s, d); err != nil {
		t.Logf("(the sample asks for what this supply lacks: %v)", err)
	}
	again, _ := SampleDemand(base, s, cfg)
	cfg.Seed++
	other, _ := SampleDemand(base, s, cfg)
	if !reflect.DeepEqual(again, d) || reflect.DeepEqual(other.Jobs, d.Jobs) {
		t.Error("not deterministic per seed, or the same for another seed")
	}
}

func TestSampleDemandRestrictsModels(t *testing.T) {
	s := &Supply{
		Providers: []Provider{{ID: "a", Model: "A10", GPUs: 8, Windows: []Span{{0, 86400}}}},
		OnDemand:  map[string]auction.Credits{"A10": 300_000, "H100": 2_000_000},
	}
	base := &Demand{Jobs: []Job{
		{ID: "x", Duration: 3600, GPUs: 1, Models: []string{"H100"}, Tier: auction.Silver, Kind: KindBatch},
		{ID: "y", Duration: 3600, GPUs: 2, Models: []string{"H100", "A10"}, Tier: auction.Bronze, Kind: KindBatch},
	}}
	cfg := DemandConfig{Days: 1, Load: 0.5}
	d, err := SampleDemand(base, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 8 GPU-days offered, half demanded in 2-GPU hours: 48 jobs of y.
	if len(d.Jobs) != 48 {
		t.Errorf("%d jobs, want 48", len(d.Jobs))
	}
	for _, j := range d.Jobs {
		if !reflect.DeepEqual(j.Models, []string{"A10"}) || j.MaxPrice != 150_000 {
			t.Fatalf("%+v: want only A10 at half its on-demand price", j)
		}
	}
	if !strings.Contains(strings.Join(d.Sources, "\n"), "1 dropped") {
		t.Errorf("sources do not count the dropped job: %q", d.Sources)
	}
	base.Jobs = base.Jobs[:1]
	if _, err := SampleDemand(base, s, cfg); err == nil {
		t.Error("a base with no model the supply has was sampled")
	}
}

func TestResolveDemand(t *testing.T) {
	d, err := LoadDemandCSV(filepath.Join("testdata", "demand_small.csv"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Supply{
		Providers: []Provider{{Model: "A10"}, {Model: "T4"}},
		OnDemand:  map[string]auction.Credits{"A10": 300_000, "T4": 100_000, "A100-80GB": 700_000},
	}
	cfg := DemandConfig{NonPayerShare: 0.5}
	if err := ResolveDemand(d, s, cfg); err != nil {
		t.Fatal(err)
	}
	early, late, late2 := d.Jobs[0], d.Jobs[1], d.Jobs[2]
	if early.MaxPrice != 50_000 || late.MaxPrice != 1_250_000 || late2.MaxPrice != 300_000 {
		t.Errorf("max prices %d %d %d: want bronze half of T4, kept, gold all of A10", early.MaxPrice, late.MaxPrice, late2.MaxPrice)
	}
	if late2.Start != 300+7200 || early.Start != 0 {
		t.Errorf("starts %d %d", late2.Start, early.Start)
	}
	if len(d.Renters) != 4 || countBehaviour(d.Renters, NonPayer) != 2 {
		t.Errorf("renters %v: want 4, 2 non-payers", d.Renters)
	}
	d.Jobs = append(d.Jobs, Job{ID: "z", Models: []string{"MI300"}, Tier: auction.Silver})
	if err := ResolveDemand(d, s, cfg); err == nil || !strings.Contains(err.Error(), "MI300") {
		t.Errorf("an unpriced model: %v", err)
	}
}
