package attest

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeLib is an nvmlLib over a fixed device set; a nil entry in devs makes
// device(i) fail, like a GPU that fell off the bus.
type fakeLib struct {
	initErr   error
	countErr  error
	devs      []*fakeDev
	shutdowns int
	watchErr  error      // watchXid's answer
	events    []xidEvent // drained by the next xidEvents
	eventsErr error
}

func (l *fakeLib) init() error     { return l.initErr }
func (l *fakeLib) shutdown() error { l.shutdowns++; return nil }
func (l *fakeLib) deviceCount() (int, error) {
	return len(l.devs), l.countErr
}
func (l *fakeLib) device(i int) (nvmlDevice, error) {
	if l.devs[i] == nil {
		return nil, errors.New("GPU is lost")
	}
	return l.devs[i], nil
}
func (l *fakeLib) driverVersion() (string, error) { return "550.54.15", nil }
func (l *fakeLib) cudaVersion() (int, error)      { return 12040, nil }
func (l *fakeLib) watchXid(nvmlDevice) error      { return l.watchErr }
func (l *fakeLib) xidEvents() ([]xidEvent, error) {
	evs := l.events
	l.events = nil
	return evs, l.eventsErr
}
func (l *fakeLib) processName(pid int) (string, error) {
	if pid == 4242 {
		return "", errors.New("Not Found")
	}
	return "python3", nil
}

type fakeDev struct {
	nameStr          string
	nameErr, tempErr error
	procs            []nvmlProc
	procErr          error
	ecc              uint64
	eccErr, migErr   error
	mig              bool
}

func (d *fakeDev) name() (string, error)                 { return d.nameStr, d.nameErr }
func (d *fakeDev) uuid() (string, error)                 { return "GPU-" + d.nameStr, nil }
func (d *fakeDev) memory() (uint64, uint64, error)       { return 24 << 30, 20 << 30, nil }
func (d *fakeDev) computeCap() (int, int, error)         { return 8, 9, nil }
func (d *fakeDev) temperature() (int, error)             { return 61, d.tempErr }
func (d *fakeDev) powerUsage() (uint32, error)           { return 312_500, nil }
func (d *fakeDev) powerLimit() (uint32, error)           { return 450_000, nil }
func (d *fakeDev) utilization() (int, error)             { return 87, nil }
func (d *fakeDev) computeProcesses() ([]nvmlProc, error) { return d.procs, d.procErr }
func (d *fakeDev) eccUncorrected() (uint64, error)       { return d.ecc, d.eccErr }
func (d *fakeDev) migMode() (bool, error)                { return d.mig, d.migErr }

func TestReadInventoryAssembles(t *testing.T) {
	lib := &fakeLib{devs: []*fakeDev{
		{nameStr: "NVIDIA GeForce RTX 4090", procs: []nvmlProc{{pid: 1234, usedBytes: 3 << 30}, {pid: 4242, usedBytes: usedNotAvailable}}},
		{nameStr: "NVIDIA A100-SXM4-80GB", procErr: errors.New("Insufficient Permissions"), tempErr: errors.New("Not Supported")},
	}}
	inv, err := readInventory(lib, freshXids())
	if err != nil {
		t.Fatal(err)
	}
	if inv.Source != "nvml" || inv.Simulated || inv.DriverVersion != "550.54.15" || inv.CUDAVersion != "12.4" {
		t.Errorf("inventory header = %+v", inv)
	}
	if len(inv.GPUs) != 2 {
		t.Fatalf("got %d GPUs, want 2", len(inv.GPUs))
	}
	g := inv.GPUs[0]
	if g.Index != 0 || g.Model != "RTX4090" || g.Name != "NVIDIA GeForce RTX 4090" || g.UUID != "GPU-NVIDIA GeForce RTX 4090" ||
		g.VRAMMiB != 24576 || g.VRAMFreeMiB != 20480 || g.ComputeCap != "8.9" || g.TempC != 61 ||
		g.PowerW != 312.5 || g.PowerLimitW != 450 || g.UtilPct != 87 || g.Simulated || g.ProcessesUnknown {
		t.Errorf("gpu 0 = %+v", g)
	}
	wantProcs := []Process{{PID: 1234, UsedMiB: 3072, Name: "python3"}, {PID: 4242}}
	if len(g.Processes) != 2 || g.Processes[0] != wantProcs[0] || g.Processes[1] != wantProcs[1] {
		t.Errorf("gpu 0 processes = %+v, want %+v", g.Processes, wantProcs)
	}
	// A refused process list must not drop the GPU, but must mark it so
	// owner control withdraws it; a refused sensor only warns.
	g = inv.GPUs[1]
	if g.Index != 1 || g.Model != "A100-80GB" || !g.ProcessesUnknown || g.Processes != nil || g.TempC != 0 {
		t.Errorf("gpu 1 = %+v", g)
	}
	w := strings.Join(inv.Warnings, "\n")
	for _, want := range []string{"gpu 1: compute processes: Insufficient Permissions", "gpu 1: temperature: Not Supported"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %q", w, want)
		}
	}
	if len(inv.Warnings) != 2 {
		t.Errorf("want exactly 2 warnings, got %q", inv.Warnings)
	}
}

func TestReadInventorySkipsUnreadableDevices(t *testing.T) {
	lib := &fakeLib{devs: []*fakeDev{
		nil,
		{nameStr: "NVIDIA L4", nameErr: errors.New("Unknown Error")},
		{nameStr: "NVIDIA L4"},
	}}
	inv, err := readInventory(lib, freshXids())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 1 || inv.GPUs[0].Index != 2 || inv.GPUs[0].Model != "L4" {
		t.Fatalf("GPUs = %+v, want only index 2", inv.GPUs)
	}
	w := strings.Join(inv.Warnings, "\n")
	if !strings.Contains(w, "gpu 0: left out: GPU is lost") || !strings.Contains(w, "gpu 1: left out: name: Unknown Error") {
		t.Errorf("warnings = %q", inv.Warnings)
	}

	lib.devs = lib.devs[:2]
	if _, err := readInventory(lib, freshXids()); err == nil || errors.Is(err, ErrNoGPU) {
		t.Errorf("all devices unreadable: err = %v, want a plain failure", err)
	}
}

func TestOpenNVMLNoDevices(t *testing.T) {
	lib := &fakeLib{}
	src, err := openNVML(lib)
	if !errors.Is(err, ErrNoGPU) || src != nil {
		t.Fatalf("openNVML with zero devices = %v, %v; want ErrNoGPU", src, err)
	}
	if err.Error() != "no NVIDIA GPU found: the driver reports no devices" {
		t.Errorf("message = %q", err)
	}
	if lib.shutdowns != 1 {
		t.Errorf("shutdowns = %d, want 1: an initialised library must be released", lib.shutdowns)
	}
	if _, err := readInventory(lib, freshXids()); !errors.Is(err, ErrNoGPU) {
		t.Errorf("readInventory with zero devices = %v, want ErrNoGPU", err)
	}
}

func TestOpenNVMLInitFailure(t *testing.T) {
	lib := &fakeLib{initErr: errors.New("Driver/library version mismatch")}
	_, err := openNVML(lib)
	if !errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), "version mismatch") {
		t.Errorf("err = %v, want ErrNoGPU naming the cause", err)
	}
	if lib.shutdowns != 0 {
		t.Errorf("shut down a library that never started")
	}
}

func TestNVMLSourceLifecycle(t *testing.T) {
	lib := &fakeLib{devs: []*fakeDev{{nameStr: "NVIDIA H200"}}}
	src, err := openNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Inventory(context.Background())
	if err != nil || len(inv.GPUs) != 1 || inv.GPUs[0].Model != "H200" {
		t.Fatalf("Inventory = %+v, %v", inv, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Inventory(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Inventory err = %v", err)
	}
	_ = src.Close()
	_ = src.Close()
	if lib.shutdowns != 1 {
		t.Errorf("shutdowns = %d after two Close, want 1", lib.shutdowns)
	}
	if _, err := src.Inventory(context.Background()); err == nil {
		t.Error("Inventory after Close succeeded")
	}
}

// This machine has no NVIDIA driver: NewNVML must say so, not panic.
// Where a GPU is present (CI with one), it must work instead.
func TestNewNVMLOnThisMachine(t *testing.T) {
	src, err := NewNVML()
	if err != nil {
		if !errors.Is(err, ErrNoGPU) || src != nil {
			t.Fatalf("NewNVML() = %v, %v; want nil and ErrNoGPU", src, err)
		}
		t.Logf("NewNVML: %v", err)
		return
	}
	defer src.Close()
	inv, err := src.Inventory(context.Background())
	if err != nil || len(inv.GPUs) == 0 || inv.Simulated {
		t.Fatalf("real GPU inventory = %+v, %v", inv, err)
	}
	t.Logf("real GPUs: %+v", inv)
}

func freshXids() *xidWatch { w := newXidWatch(); return &w }
