package attest

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestParseSimulateSpec(t *testing.T) {
	valid := []struct {
		spec string
		want []SimSpec
	}{
		{"RTX4090", []SimSpec{{"RTX4090", 1}}},
		{"2xRTX4090", []SimSpec{{"RTX4090", 2}}},
		{"1xH100,2xA100-80GB", []SimSpec{{"H100", 1}, {"A100-80GB", 2}}},
		{" 2 x rtx4090 , t4 ", []SimSpec{{"RTX4090", 2}, {"T4", 1}}},
		{"16XH200", []SimSpec{{"H200", 16}}},
	}
	for _, c := range valid {
		got, err := ParseSimulateSpec(c.spec)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseSimulateSpec(%q) = %v, %v; want %v", c.spec, got, err, c.want)
		}
	}
	invalid := []struct{ spec, wantInErr string }{
		{"", "empty"},
		{"   ", "empty"},
		{"2xRTX4090,,T4", "part 2 is empty"},
		{"0xH100", `"0xH100": count 0 is not in 1..16`},
		{"17xT4", `"17xT4": count 17 is not in 1..16`},
		{"99999999999999999999xT4", "not in 1..16"},
		{"2x", `"2x": no model after the count`},
		{"2xRTX9999", `unknown model "RTX9999"; known models: A10, A100-40GB`},
		{"A100", `unknown model "A100"`},
		{"-1xT4", `unknown model "-1xT4"`},
		{"10xH100,7xT4", "17 GPUs in all, more than 16"},
	}
	for _, c := range invalid {
		got, err := ParseSimulateSpec(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.wantInErr) {
			t.Errorf("ParseSimulateSpec(%q) = %v, %v; want error containing %q", c.spec, got, err, c.wantInErr)
		}
	}
}

func TestNewSimulatedBadSpecIsNilSource(t *testing.T) {
	src, err := NewSimulated("3xGTX1080")
	if err == nil || src != nil {
		t.Fatalf("NewSimulated(bad) = %v, %v; want nil Source and an error", src, err)
	}
}

func TestSimulatedInventory(t *testing.T) {
	src, err := NewSimulated("1xH100,2xA100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Simulated || inv.Source != "simulated" || len(inv.GPUs) != 3 {
		t.Fatalf("inventory = %+v", inv)
	}
	uuids := map[string]bool{}
	for i, g := range inv.GPUs {
		ms := catalogue[g.Model]
		if !g.Simulated || g.Index != i || !strings.HasPrefix(g.UUID, "SIM-") || g.Name != "Simulated "+ms.Name ||
			g.VRAMMiB != ms.VRAMMiB || g.VRAMFreeMiB != ms.VRAMMiB || g.ComputeCap != ms.ComputeCap ||
			g.PowerLimitW != ms.PowerLimitW || g.UtilPct != 0 || len(g.Processes) != 0 {
			t.Errorf("gpu %d = %+v", i, g)
		}
		if g.TempC < ms.IdleTempC-1 || g.TempC > ms.IdleTempC+2 ||
			g.PowerW < ms.IdlePowerW*0.95 || g.PowerW > ms.IdlePowerW*1.05+0.001 {
			t.Errorf("gpu %d idle readings %d°C %.3f W far from %d°C %.1f W", i, g.TempC, g.PowerW, ms.IdleTempC, ms.IdlePowerW)
		}
		uuids[g.UUID] = true
	}
	if len(uuids) != 3 {
		t.Errorf("UUIDs not distinct: %v", uuids)
	}
	if m := []string{inv.GPUs[0].Model, inv.GPUs[1].Model, inv.GPUs[2].Model}; !reflect.DeepEqual(m, []string{"H100", "A100-80GB", "A100-80GB"}) {
		t.Errorf("models = %v", m)
	}
}

func uuidsOf(t *testing.T, spec, seed string) []string {
	t.Helper()
	s, err := NewSimulatedSeed(spec, seed)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := s.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range inv.GPUs {
		out = append(out, g.UUID)
	}
	return out
}

func TestSimulatedUUIDsAreStable(t *testing.T) {
	a := uuidsOf(t, "2xRTX4090", "12D3KooWpeerA")
	if b := uuidsOf(t, "2xrtx4090", "12D3KooWpeerA"); !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, new process: %v != %v", a, b)
	}
	if c := uuidsOf(t, "2xRTX4090", "12D3KooWpeerB"); c[0] == a[0] || c[1] == a[1] {
		t.Errorf("different seeds share UUIDs: %v %v", a, c)
	}
	if d := uuidsOf(t, "2xRTX4090,1xT4", "12D3KooWpeerA"); !reflect.DeepEqual(d[:2], a) {
		t.Errorf("adding a GPU changed earlier UUIDs: %v -> %v", a, d)
	}
	if e := uuidsOf(t, "1xRTX4090,1xL4", "12D3KooWpeerA"); e[1] == a[1] {
		t.Errorf("a different model at index 1 kept its UUID")
	}
	if len(a[0]) != len("SIM-")+36 {
		t.Errorf("UUID %q is not NVML-shaped", a[0])
	}
}

func TestSimulatedLoad(t *testing.T) {
	s, err := NewSimulatedSeed("2xRTX4090", "")
	if err != nil {
		t.Fatal(err)
	}
	procs := []Process{{PID: 1234, UsedMiB: 4000, Name: "blender"}}
	if err := s.SetLoad(1, 88, 430, procs); err != nil {
		t.Fatal(err)
	}
	procs[0].PID = 1 // the source must hold its own copy
	if err := s.SetLoad(2, 88, 430, nil); err == nil {
		t.Error("SetLoad on a missing GPU succeeded")
	}
	for range 3 { // loaded readings are exact, every time
		inv, _ := s.Inventory(context.Background())
		g := inv.GPUs[1]
		if g.TempC != 88 || g.PowerW != 430 || g.VRAMFreeMiB != 24564-4000 || g.UtilPct < 90 ||
			len(g.Processes) != 1 || g.Processes[0].PID != 1234 {
			t.Fatalf("loaded gpu = %+v", g)
		}
	}
	if err := s.Idle(1); err != nil {
		t.Fatal(err)
	}
	inv, _ := s.Inventory(context.Background())
	if g := inv.GPUs[1]; g.TempC > 40 || len(g.Processes) != 0 || g.VRAMFreeMiB != g.VRAMMiB {
		t.Errorf("idle again = %+v", g)
	}
	_ = s.Close()
	if _, err := s.Inventory(context.Background()); err == nil {
		t.Error("Inventory after Close succeeded")
	}
}

// Idle readings must move (so dashboards look live) yet repeat exactly for
// the same sequence of calls (so tests are reproducible).
func TestSimulatedJitterIsDeterministic(t *testing.T) {
	series := func() []float64 {
		s, _ := NewSimulatedSeed("RTX3090", "x")
		var out []float64
		for range 20 {
			inv, _ := s.Inventory(context.Background())
			out = append(out, float64(inv.GPUs[0].TempC), inv.GPUs[0].PowerW)
		}
		return out
	}
	a, b := series(), series()
	if !reflect.DeepEqual(a, b) {
		t.Errorf("jitter not deterministic")
	}
	moved := false
	for i := 2; i < len(a); i++ {
		moved = moved || a[i] != a[i%2]
	}
	if !moved {
		t.Errorf("idle readings never change: %v", a)
	}
}
