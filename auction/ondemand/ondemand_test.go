package ondemand

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseMedians(t *testing.T) {
	in := "gpu_model,gpu_count,vram_mib_total,usd_per_hour,location\n" +
		"H100,1,81559,1.80,\"Czechia, CZ, EU\"\n" +
		"H100,2,163118,4.00,\"Florida, US, NA\"\n" +
		"H100,1,81559,2.10,\"Texas, US, NA\"\n" +
		"A100,1,40960,1.00,\"Hesse, DE, EU\"\n" +
		"A100,2,81920,1.00,\"Taipei, TW, AS\"\n"
	l, err := Parse(strings.NewReader(in), "p.csv")
	if err != nil {
		t.Fatal(err)
	}
	// H100 per GPU 1.80, 2.00, 2.10: the middle one; A100 1.00 and 0.50:
	// their mean.
	if l.PerGPU["H100"] != 2_000_000 || l.PerGPU["A100"] != 750_000 || len(l.PerGPU) != 2 {
		t.Errorf("medians %v", l.PerGPU)
	}
	want := []Location{{"CZ", "eu"}, {"US", "na"}, {"US", "na"}, {"DE", "eu"}, {"TW", "as"}}
	if !reflect.DeepEqual(l.Locations, want) {
		t.Errorf("locations %v, want %v", l.Locations, want)
	}
}

func TestParseRefuses(t *testing.T) {
	const h = "gpu_model,gpu_count,usd_per_hour,location\n"
	for _, c := range []struct{ in, want string }{
		{"", "p.csv:1: reading the header"},
		{"gpu_model,usd_per_hour,location\n", `no column "gpu_count"`},
		{h, "p.csv: no offers"},
		{h + "H100,0,1.8,\"a, CZ, EU\"\n", `p.csv:2: gpu_count "0"`},
		{h + "H100,1,1.8e3,\"a, CZ, EU\"\n", `p.csv:2: usd_per_hour "1.8e3"`},
		{h + "H100,1,0.0000001,\"a, CZ, EU\"\n", `usd_per_hour "0.0000001"`},
		{h + "H100,1,-1,\"a, CZ, EU\"\n", `usd_per_hour "-1"`},
		{h + "H100,1,1.8,Prague\n", `location "Prague"`},
		{h + "H100,1,1.8,\"a, Czechia, EU\"\n", "lacks a 2-letter country"},
		{h + ",1,1.8,\"a, CZ, EU\"\n", "gpu_model is empty"},
	} {
		_, err := Parse(strings.NewReader(c.in), "p.csv")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}
