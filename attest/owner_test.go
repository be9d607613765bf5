package attest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestWithdrawn(t *testing.T) {
	lim := Limits{MaxTempC: 85, MaxPowerW: 300}
	own := JobProcesses{777: {Job: "a", GPUs: []string{"GPU-a"}}, 778: {Job: "a", GPUs: []string{"GPU-a"}}}
	cases := []struct {
		name   string
		g      GPU
		lim    Limits
		want   bool
		reason string
	}{
		{"idle", GPU{TempC: 40, PowerW: 20}, lim, false, ""},
		{"at the limits", GPU{TempC: 85, PowerW: 300}, lim, false, ""},
		{"hot", GPU{TempC: 91, PowerW: 20}, lim, true, "temperature 91°C over limit 85°C"},
		{"power", GPU{TempC: 40, PowerW: 312.54}, lim, true, "power draw 312.5 W over limit 300 W"},
		{"gleaner's own job", GPU{UUID: "GPU-a", Processes: []Process{{PID: 777}, {PID: 778}}}, lim, false, ""},
		{"owner's process", GPU{UUID: "GPU-a", Processes: []Process{{PID: 777}, {PID: 1234}}}, lim, true, "busy with the owner's processes (pid 1234)"},
		{"owner's processes sorted", GPU{UUID: "GPU-a", Processes: []Process{{PID: 99}, {PID: 777}, {PID: 12}}}, lim, true, "busy with the owner's processes (pid 12, 99)"},
		{"owner beats heat", GPU{TempC: 99, Processes: []Process{{PID: 5}}}, lim, true, "busy with the owner's processes (pid 5)"},
		{"process list unreadable", GPU{ProcessesUnknown: true}, lim, true, "its process list cannot be read, so the owner may be using it"},
		{"no limits", GPU{TempC: 105, PowerW: 900}, Limits{}, false, ""},
		{"no limits, owner busy", GPU{Processes: []Process{{PID: 777}}}, Limits{}, true, "busy with the owner's processes (pid 777)"},
	}
	for _, c := range cases {
		o := own
		if c.name == "no limits, owner busy" {
			o = nil // nothing of gleaner's running: every process is the owner's
		}
		got, reason := Withdrawn(c.g, c.lim, o)
		if got != c.want || reason != c.reason {
			t.Errorf("%s: Withdrawn = %v, %q; want %v, %q", c.name, got, reason, c.want, c.reason)
		}
	}
}

func gpus(temps ...int) Inventory {
	inv := Inventory{}
	for i, tc := range temps {
		inv.GPUs = append(inv.GPUs, GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: "RTX4090", TempC: tc, PowerW: 30})
	}
	return inv
}

func TestMonitorRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := NewFake(gpus(40, 40))
		var mu sync.Mutex
		own := JobProcesses{}
		m := NewMonitor(fake, func() Limits { return Limits{MaxTempC: 85} },
			func(context.Context) JobProcesses { mu.Lock(); defer mu.Unlock(); return own }, time.Second)

		ch := make(chan Availability, 32)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx, func(a Availability) { ch <- a }) }()

		// step changes the world half-way between polls, lets a poll run,
		// and returns what was reported (nil: nothing).
		step := func(change func()) []Availability {
			time.Sleep(500 * time.Millisecond)
			change()
			time.Sleep(time.Second)
			synctest.Wait()
			var out []Availability
			for len(ch) > 0 {
				out = append(out, <-ch)
			}
			return out
		}
		expect := func(what string, got []Availability, avail []int, withdrawn map[int]string) {
			t.Helper()
			if len(got) != 1 {
				t.Fatalf("%s: %d reports, want 1: %+v", what, len(got), got)
			}
			if !reflect.DeepEqual(got[0].Available, avail) || !reflect.DeepEqual(got[0].Withdrawn, withdrawn) {
				t.Fatalf("%s: got %v %v, want %v %v", what, got[0].Available, got[0].Withdrawn, avail, withdrawn)
			}
		}
		none := map[int]string{}

		expect("first poll", step(func() {}), []int{0, 1}, none)
		if got := step(func() {}); got != nil {
			t.Fatalf("unchanged world reported again: %+v", got)
		}
		expect("gpu 1 hot", step(func() { fake.Set(gpus(40, 91)) }), []int{0},
			map[int]string{1: "temperature 91°C over limit 85°C"})
		if got := step(func() { fake.Set(gpus(41, 93)) }); got != nil {
			t.Fatalf("a hot GPU getting hotter re-announced: %+v", got)
		}
		busy := gpus(40, 40)
		busy.GPUs[0].Processes = []Process{{PID: 777}}
		expect("gpu 1 cool, gpu 0 runs an unknown pid", step(func() { fake.Set(busy) }), []int{1},
			map[int]string{0: "busy with the owner's processes (pid 777)"})
		expect("pid 777 becomes gleaner's job", step(func() { mu.Lock(); own = JobProcesses{777: {Job: "j", GPUs: []string{"GPU-0"}}}; mu.Unlock() }),
			[]int{0, 1}, none)
		fails := step(func() { fake.SetError(errors.New("GPU is lost")) })
		expect("source fails", fails, nil, map[int]string{
			0: "the GPU inventory could not be read: GPU is lost",
			1: "the GPU inventory could not be read: GPU is lost"})
		if fails[0].Err != "GPU is lost" {
			t.Errorf("Err = %q", fails[0].Err)
		}
		expect("source recovers", step(func() { fake.Set(gpus(40, 40)) }), []int{0, 1}, none)
		expect("gpu 1 vanishes", step(func() { fake.Set(gpus(40)) }), []int{0},
			map[int]string{1: "missing from the latest inventory (see its warnings)"})

		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
		if n := fake.Calls(); n < 10 {
			t.Errorf("only %d polls", n)
		}
	})
}

func TestMonitorCheckAndDefaults(t *testing.T) {
	fake := NewFake(gpus(95))
	m := NewMonitor(fake, nil, nil, 0)
	if m.every != DefaultMonitorInterval {
		t.Errorf("interval = %v", m.every)
	}
	av, changed := m.Check(context.Background())
	if !changed || !reflect.DeepEqual(av.Available, []int{0}) || av.Inventory.Source != "fake" {
		t.Errorf("nil limits must mean none: %+v %v", av, changed)
	}
	if _, changed := m.Check(context.Background()); changed {
		t.Error("second identical Check reported a change")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, changed := m.Check(ctx); changed {
		t.Error("a cancelled Check was reported as a change")
	}
	if av, changed := m.Check(context.Background()); changed || len(av.Available) != 1 {
		t.Error("a cancelled Check disturbed the recorded state")
	}
}

func TestFakeCopiesAndIsConcurrent(t *testing.T) {
	inv := gpus(40)
	inv.GPUs[0].Processes = []Process{{PID: 1}}
	f := NewFake(inv)
	inv.GPUs[0].Processes[0].PID = 2 // the caller's copy is not the Fake's
	got, _ := f.Inventory(context.Background())
	got.GPUs[0].Processes[0].PID = 3 // nor is a reader's
	again, _ := f.Inventory(context.Background())
	if again.GPUs[0].Processes[0].PID != 1 || again.Source != "fake" {
		t.Fatalf("Fake shares memory with callers: %+v", again)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				f.Set(gpus(40 + i))
				_, _ = f.Inventory(context.Background())
			}
		})
	}
	wg.Wait()
	if f.Calls() != 802 {
		t.Errorf("Calls = %d, want 802", f.Calls())
	}
	_ = f.Close()
	if !f.Closed() {
		t.Error("Close not recorded")
	}
}

// A GPU over the owner's hard limit is withdrawn and listed in Stop (its
// jobs of every tier are to stop); one over the soft limit only is
// withdrawn; crossing the hard limit is a change the node hears of.
func TestHardLimits(t *testing.T) {
	fake := NewFake(gpus(40, 88, 97))
	lim := Limits{MaxTempC: 85, StopTempC: 95}
	m := NewMonitor(fake, func() Limits { return lim }, nil, 0)
	av, _ := m.Check(context.Background())
	if !reflect.DeepEqual(av.Available, []int{0}) || av.Withdrawn[1] == "" || av.Withdrawn[2] == "" {
		t.Fatalf("availability %+v", av)
	}
	if len(av.Stop) != 1 || !strings.Contains(av.Stop[2], "hard limit 95°C") {
		t.Fatalf("stop %v, want GPU 2 alone, over the hard limit", av.Stop)
	}
	// No soft limit: the hard one still withdraws the GPU.
	lim = Limits{StopPowerW: 25}
	if av, changed := m.Check(context.Background()); !changed || len(av.Available) != 0 || len(av.Stop) != 3 {
		t.Fatalf("power over the hard limit everywhere: %+v (changed %v)", av, changed)
	}
}
