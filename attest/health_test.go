package attest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// healthy is two GPUs whose driver reports Xid events and ECC counts.
func healthy(ecc uint64) Inventory {
	inv := gpus(40, 40)
	for i := range inv.GPUs {
		inv.GPUs[i].Health = Health{ECCKnown: true, ECCUncorrected: ecc, XidKnown: true}
	}
	return inv
}

// checkFaulted asserts that only GPU 1 is faulted, withdrawn and stopped,
// for a reason containing want.
func checkFaulted(t *testing.T, av Availability, changed bool, want string) {
	t.Helper()
	if !changed || !reflect.DeepEqual(av.Available, []int{0}) {
		t.Fatalf("available %v (changed %v), want GPU 0 alone", av.Available, changed)
	}
	if len(av.Faults) != 1 || !strings.Contains(av.Faults[1], want) {
		t.Fatalf("faults %v, want GPU 1's naming %q", av.Faults, want)
	}
	if av.Withdrawn[1] != av.Faults[1] || av.Stop[1] != av.Faults[1] || len(av.Stop) != 1 {
		t.Fatalf("withdrawn %v, stop %v: the fault must withdraw GPU 1 and stop its jobs", av.Withdrawn, av.Stop)
	}
}

func TestAnXidWithdrawsTheGPUAndStopsItsJobs(t *testing.T) {
	fake := NewFake(healthy(0))
	m := NewMonitor(fake, nil, nil, 0)
	ctx := context.Background()
	if av, _ := m.Check(ctx); len(av.Available) != 2 || av.Faults != nil {
		t.Fatalf("healthy GPUs: %+v", av)
	}
	inv := healthy(0)
	inv.GPUs[1].Health.Xids, inv.GPUs[1].Health.LastXid = 2, 79
	fake.Set(inv)
	av, changed := m.Check(ctx)
	checkFaulted(t, av, changed, "Xid 79")
	if _, changed := m.Check(ctx); changed {
		t.Error("the same fault was announced twice")
	}
	// It stays out until the node restarts, even if the source forgets.
	fake.Set(healthy(0))
	if av, changed := m.Check(ctx); changed || av.Faults[1] == "" {
		t.Fatalf("the fault did not latch: %+v", av)
	}
	if got := m.FaultCounts(); got[FaultXid] != 2 || got[FaultECC] != 0 {
		t.Errorf("fault counts %v, want 2 Xids", got)
	}
}

func TestRisingECCWithdrawsButSteadyHistoryDoesNot(t *testing.T) {
	fake := NewFake(healthy(5)) // errors from before the node started
	m := NewMonitor(fake, nil, nil, 0)
	ctx := context.Background()
	for range 3 {
		if av, _ := m.Check(ctx); len(av.Available) != 2 || av.Faults != nil {
			t.Fatalf("a steady ECC count withdrew a GPU: %+v", av)
		}
	}
	inv := healthy(5)
	inv.GPUs[1].Health.ECCUncorrected = 7
	fake.Set(inv)
	av, changed := m.Check(ctx)
	checkFaulted(t, av, changed, "rose from 5 to 7")
	if got := m.FaultCounts(); got[FaultECC] != 1 || got[FaultXid] != 0 {
		t.Errorf("fault counts %v, want 1 ECC", got)
	}
}

// Health the driver cannot report is unknown, not a fault. The simulated
// source reports no health, so its GPUs never fault; a source that does
// report health for a simulated GPU (a test's Fake standing in for a card
// a job container can run on without a device) is judged like any.
func TestUnknownHealthStaysOfferedAndSimulatedGPUsReportNone(t *testing.T) {
	inv := gpus(40, 40)
	fake := NewFake(inv)
	m := NewMonitor(fake, nil, nil, 0)
	m.Check(context.Background())
	inv.GPUs[0].Health = Health{ECCUncorrected: 9, Xids: 1, LastXid: 79} // nothing Known
	fake.Set(inv)
	if av, _ := m.Check(context.Background()); len(av.Available) != 2 || av.Faults != nil {
		t.Fatalf("unknown health withdrew a GPU: %+v", av)
	}

	sim, err := NewSimulatedSeed("2xRTX4090", "health")
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetLoad(1, 90, 400, []Process{{PID: 7, UsedMiB: 100}}); err != nil {
		t.Fatal(err)
	}
	sm := NewMonitor(sim, nil, nil, 0)
	for range 3 {
		av, _ := sm.Check(context.Background())
		for _, g := range av.Inventory.GPUs {
			if g.Health != (Health{}) {
				t.Fatalf("simulated GPU %d reports health %+v: simulated GPUs must never fault", g.Index, g.Health)
			}
		}
		if av.Faults != nil {
			t.Fatalf("a simulated GPU faulted: %+v", av)
		}
	}

	inv.GPUs[1].Simulated = true
	inv.GPUs[1].Health = Health{XidKnown: true}
	fake.Set(inv)
	m.Check(context.Background())
	inv.GPUs[1].Health = Health{XidKnown: true, Xids: 1, LastXid: 79}
	fake.Set(inv)
	if av, _ := m.Check(context.Background()); av.Faults[1] == "" {
		t.Fatalf("a reported Xid on a simulated GPU was ignored: %+v", av)
	}
}

// The owner clears a fault after looking at the card: the GPU is offered
// again at the next poll, and faults again only on a new Xid or a further
// ECC rise. An index never listed, or a GPU without a fault, is an error.
func TestClearFaultOffersTheGPUAgainUntilANewFault(t *testing.T) {
	fake := NewFake(healthy(0))
	m := NewMonitor(fake, nil, nil, 0)
	ctx := context.Background()
	m.Check(ctx)
	if _, err := m.ClearFault(1); !errors.Is(err, ErrNotFaulted) {
		t.Fatalf("clearing a sound GPU: %v, want ErrNotFaulted", err)
	}
	if _, err := m.ClearFault(7); !errors.Is(err, ErrNoSuchGPU) {
		t.Fatalf("clearing GPU 7 of 2: %v, want ErrNoSuchGPU", err)
	}
	inv := healthy(0)
	inv.GPUs[1].Health.Xids, inv.GPUs[1].Health.LastXid = 1, 79
	inv.GPUs[1].Health.ECCUncorrected = 0
	fake.Set(inv)
	av, changed := m.Check(ctx)
	checkFaulted(t, av, changed, "Xid 79")

	cleared, err := m.ClearFault(1)
	if err != nil || !strings.Contains(cleared.Fault, "Xid 79") || cleared.AfterPoll != av.Poll {
		t.Fatalf("ClearFault(1) = %+v, %v; want Xid 79 after poll %d", cleared, err, av.Poll)
	}
	select {
	case <-m.poke:
	default:
		t.Fatal("ClearFault did not ask Run for a poll")
	}
	// The same readings: no new fault.
	av, changed = m.Check(ctx)
	if !changed || len(av.Available) != 2 || av.Faults != nil || av.Stop != nil || av.Poll <= cleared.AfterPoll {
		t.Fatalf("after the clear (changed %v): %+v, want both GPUs offered", changed, av)
	}
	if _, err := m.ClearFault(1); !errors.Is(err, ErrNotFaulted) {
		t.Fatalf("clearing it twice: %v, want ErrNotFaulted", err)
	}
	// A new fault (an ECC rise) withdraws it again.
	inv.GPUs[1].Health.ECCUncorrected = 2
	fake.Set(inv)
	av, changed = m.Check(ctx)
	checkFaulted(t, av, changed, "rose from 0 to 2")
	// One that arrives as the fault is cleared is reported all the same,
	// though the availability's causes are as before the clear.
	if _, err := m.ClearFault(1); err != nil {
		t.Fatal(err)
	}
	inv.GPUs[1].Health.ECCUncorrected = 3
	fake.Set(inv)
	av, changed = m.Check(ctx)
	checkFaulted(t, av, changed, "rose from 2 to 3")
	if got := m.FaultCounts(); got[FaultXid] != 1 || got[FaultECC] != 2 {
		t.Errorf("fault counts %v: clearing must not forget what was counted", got)
	}
}

func TestAGPUInMIGModeIsNotOffered(t *testing.T) {
	inv := gpus(40, 40)
	inv.GPUs[1].MIG = true
	m := NewMonitor(NewFake(inv), nil, nil, 0)
	av, _ := m.Check(context.Background())
	if !reflect.DeepEqual(av.Available, []int{0}) || av.Withdrawn[1] != MIGReason || av.Stop != nil {
		t.Fatalf("availability %+v, want GPU 1 withdrawn (not stopped) as in MIG mode", av)
	}
}

// Through the NVML source: Xid events are counted per GPU and kept
// across reads (app-caused Xids left out), ECC and MIG are read, and not
// supported leaves the health unknown without a warning.
func TestNVMLHealthReadings(t *testing.T) {
	lib := &fakeLib{devs: []*fakeDev{
		{nameStr: "NVIDIA H100 80GB HBM3", ecc: 3},
		{nameStr: "NVIDIA A100-SXM4-80GB", mig: true},
	}}
	src, err := openNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := src.Inventory(ctx); err != nil { // registers both
		t.Fatal(err)
	}
	h100 := "GPU-NVIDIA H100 80GB HBM3"
	lib.events = []xidEvent{{uuid: h100, xid: 13}, {uuid: h100, xid: 48}, {uuid: h100, xid: 79}}
	for read := range 2 { // the second read sees the same count
		inv, err := src.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := Health{ECCKnown: true, ECCUncorrected: 3, XidKnown: true, Xids: 2, LastXid: 79}
		if g := inv.GPUs[0]; g.Health != want || g.MIG {
			t.Fatalf("read %d: gpu 0 health %+v mig %v, want %+v", read, g.Health, g.MIG, want)
		}
		if g := inv.GPUs[1]; g.Health != (Health{ECCKnown: true, XidKnown: true}) || !g.MIG {
			t.Fatalf("read %d: gpu 1 health %+v mig %v", read, g.Health, g.MIG)
		}
	}

	unsupported := &fakeLib{watchErr: errNotSupported, devs: []*fakeDev{
		{nameStr: "NVIDIA GeForce RTX 4090", eccErr: errNotSupported, migErr: errNotSupported},
	}}
	src, err = openNVML(unsupported)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor(src, nil, nil, 0)
	for range 2 {
		unsupported.events = []xidEvent{{uuid: "GPU-NVIDIA GeForce RTX 4090", xid: 79}} // not registered: ignored
		av, _ := m.Check(ctx)
		if av.Err != "" || len(av.Available) != 1 || av.Inventory.GPUs[0].Health != (Health{}) || len(av.Inventory.Warnings) != 0 {
			t.Fatalf("not supported must leave the GPU offered, health unknown, no warning: %+v", av)
		}
	}

	failing := &fakeLib{watchErr: errors.New("Unknown Error"), devs: []*fakeDev{
		{nameStr: "NVIDIA GeForce RTX 4090", eccErr: errors.New("GPU is lost")},
	}}
	inv, err := readInventory(failing, freshXids())
	if err != nil || len(inv.Warnings) != 2 || inv.GPUs[0].Health != (Health{}) {
		t.Fatalf("failed health reads must warn and stay unknown: %+v %v", inv, err)
	}
}
