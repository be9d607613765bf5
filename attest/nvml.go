package attest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// nvmlLib is the slice of NVML that the inventory uses, in plain Go types.
// The cgo adapter (nvml_cgo.go) implements it over go-nvml; tests implement
// it with a fake device set, so everything below is tested without a GPU.
type nvmlLib interface {
	init() error // errors wrap ErrNoGPU when there is no usable driver
	shutdown() error
	deviceCount() (int, error)
	device(index int) (nvmlDevice, error)
	driverVersion() (string, error)
	cudaVersion() (int, error) // e.g. 12040 for 12.4
	processName(pid int) (string, error)
	// watchXid registers dev for Xid critical error events in the
	// library's one event set (made at the first call; shutdown frees
	// it). errNotSupported: the device cannot deliver them.
	watchXid(dev nvmlDevice) error
	// xidEvents drains the events that arrived since the last call,
	// without waiting for any.
	xidEvents() ([]xidEvent, error)
}

// nvmlDevice is one device handle.
type nvmlDevice interface {
	name() (string, error)
	uuid() (string, error)
	memory() (totalBytes, freeBytes uint64, err error)
	computeCap() (major, minor int, err error)
	temperature() (int, error)   // °C
	powerUsage() (uint32, error) // mW
	powerLimit() (uint32, error) // mW, the enforced limit
	utilization() (int, error)   // percent
	computeProcesses() ([]nvmlProc, error)
	eccUncorrected() (uint64, error) // volatile count; errNotSupported without ECC
	migMode() (bool, error)          // current mode; errNotSupported: not MIG-capable
}

// nvmlProc is a compute process as NVML reports it.
type nvmlProc struct {
	pid       uint32
	usedBytes uint64
}

// usedNotAvailable is NVML_VALUE_NOT_AVAILABLE for a process's memory,
// reported when the driver cannot attribute memory (e.g. under WDDM).
const usedNotAvailable = ^uint64(0)

// nvmlSource is the Source for real GPUs.
type nvmlSource struct {
	mu     sync.Mutex // serialises reads against Close
	lib    nvmlLib
	closed bool
	xids   xidWatch
}

// openNVML initialises the library and checks there is at least one
// device; it is NewNVML without cgo, so the ErrNoGPU paths are testable.
func openNVML(lib nvmlLib) (Source, error) {
	if err := lib.init(); err != nil {
		if !errors.Is(err, ErrNoGPU) {
			err = fmt.Errorf("%w: %v", ErrNoGPU, err)
		}
		return nil, err
	}
	n, err := lib.deviceCount()
	switch {
	case err != nil:
		err = fmt.Errorf("%w: counting devices: %v", ErrNoGPU, err)
	case n == 0:
		err = fmt.Errorf("%w: the driver reports no devices", ErrNoGPU)
	}
	if err != nil {
		_ = lib.shutdown() // nothing to sell; the shutdown error adds nothing
		return nil, err
	}
	return &nvmlSource{lib: lib, xids: newXidWatch()}, nil
}

// Inventory reads every device afresh; NVML reads are cheap (well under a
// millisecond each), so there is no cache to go stale.
func (s *nvmlSource) Inventory(ctx context.Context) (Inventory, error) {
	if err := ctx.Err(); err != nil {
		return Inventory{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Inventory{}, errors.New("attest: NVML source is closed")
	}
	return readInventory(s.lib, &s.xids)
}

// Close shuts NVML down once; later calls do nothing.
func (s *nvmlSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.lib.shutdown()
}

// readInventory assembles a snapshot. A device that cannot say what it is
// (name, UUID, memory) is left out with a warning rather than failing the
// whole machine: the other GPUs are still sellable. Sensor readings that
// are not supported stay zero with a warning. xids keeps the Xid events
// across reads (nvml_health.go).
func readInventory(lib nvmlLib, xids *xidWatch) (Inventory, error) {
	inv := Inventory{Source: "nvml"}
	n, err := lib.deviceCount()
	if err != nil {
		return Inventory{}, fmt.Errorf("attest: counting GPUs: %w", err)
	}
	if n == 0 {
		return Inventory{}, fmt.Errorf("%w: the driver reports no devices", ErrNoGPU)
	}
	warn := func(format string, args ...any) {
		inv.Warnings = append(inv.Warnings, fmt.Sprintf(format, args...))
	}
	if v, err := lib.driverVersion(); err == nil {
		inv.DriverVersion = v
	} else {
		warn("driver version: %v", err)
	}
	if v, err := lib.cudaVersion(); err == nil {
		inv.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	} else {
		warn("CUDA version: %v", err)
	}
	for i := 0; i < n; i++ {
		dev, err := lib.device(i)
		if err != nil {
			warn("gpu %d: left out: %v", i, err)
			continue
		}
		g, err := readGPU(lib, i, dev, warn)
		if err != nil {
			warn("gpu %d: left out: %v", i, err)
			continue
		}
		xids.watch(lib, dev, g.UUID, func(err error) { warn("gpu %d: Xid events: %v", i, err) })
		inv.GPUs = append(inv.GPUs, g)
	}
	xids.drain(lib, func(err error) { warn("Xid events: %v", err) })
	for i := range inv.GPUs {
		xids.fill(&inv.GPUs[i])
	}
	if len(inv.GPUs) == 0 {
		return Inventory{}, fmt.Errorf("attest: none of %d GPUs could be read: %s",
			n, strings.Join(inv.Warnings, "; "))
	}
	return inv, nil
}

// readGPU reads one device. Identity errors are returned; sensor errors go
// to warn and leave the field zero.
func readGPU(lib nvmlLib, index int, dev nvmlDevice, warn func(string, ...any)) (GPU, error) {
	g := GPU{Index: index}
	var err error
	if g.Name, err = dev.name(); err != nil {
		return GPU{}, fmt.Errorf("name: %w", err)
	}
	g.Model = CanonicalModel(g.Name)
	if g.UUID, err = dev.uuid(); err != nil {
		return GPU{}, fmt.Errorf("uuid: %w", err)
	}
	total, free, err := dev.memory()
	if err != nil {
		return GPU{}, fmt.Errorf("memory: %w", err)
	}
	g.VRAMMiB, g.VRAMFreeMiB = int(total>>20), int(free>>20)

	if major, minor, err := dev.computeCap(); err == nil {
		g.ComputeCap = fmt.Sprintf("%d.%d", major, minor)
	} else {
		warn("gpu %d: compute capability: %v", index, err)
	}
	if t, err := dev.temperature(); err == nil {
		g.TempC = t
	} else {
		warn("gpu %d: temperature: %v", index, err)
	}
	if mw, err := dev.powerUsage(); err == nil {
		g.PowerW = float64(mw) / 1000
	} else {
		warn("gpu %d: power draw: %v", index, err)
	}
	if mw, err := dev.powerLimit(); err == nil {
		g.PowerLimitW = float64(mw) / 1000
	} else {
		warn("gpu %d: power limit: %v", index, err)
	}
	if u, err := dev.utilization(); err == nil {
		g.UtilPct = u
	} else {
		warn("gpu %d: utilisation: %v", index, err)
	}
	readHealth(dev, &g, func(what string, err error) { warn("gpu %d: %s: %v", index, what, err) })
	procs, err := dev.computeProcesses()
	if err != nil {
		// Fail safe for the owner: an unreadable list might hide their work.
		g.ProcessesUnknown = true
		warn("gpu %d: compute processes: %v", index, err)
	}
	for _, p := range procs {
		proc := Process{PID: int(p.pid)}
		if p.usedBytes != usedNotAvailable {
			proc.UsedMiB = int(p.usedBytes >> 20)
		}
		// The name is a courtesy for the owner's logs; a process in another
		// PID namespace has none we can read, which is not worth a warning.
		proc.Name, _ = lib.processName(proc.PID)
		g.Processes = append(g.Processes, proc)
	}
	return g, nil
}
