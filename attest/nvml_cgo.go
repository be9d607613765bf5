//go:build cgo

package attest

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NewNVML opens the NVIDIA driver's management library and returns a Source
// for the machine's real GPUs. go-nvml loads libnvidia-ml.so.1 with dlopen
// at this call, so the binary builds and starts on machines without the
// driver; there, and where the driver lists no device, the error wraps
// ErrNoGPU and says why. It needs cgo; without cgo see nvml_nocgo.go.
func NewNVML() (Source, error) {
	return openNVML(&cgoLib{l: nvml.New()})
}

// cgoLib adapts go-nvml to nvmlLib.
type cgoLib struct {
	l   nvml.Interface
	set nvml.EventSet // Xid events; nil until the first watchXid
}

// errOf turns an NVML return code into an error with the driver's text;
// not supported is errNotSupported, which callers test for.
func (c *cgoLib) errOf(ret nvml.Return) error {
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED:
		return errNotSupported
	}
	return errors.New(c.l.ErrorString(ret))
}

func (c *cgoLib) init() error {
	switch ret := c.l.Init(); ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoGPU)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w: the NVIDIA kernel driver is not loaded", ErrNoGPU)
	default:
		return fmt.Errorf("%w: NVML failed to start: %v", ErrNoGPU, c.errOf(ret))
	}
}

func (c *cgoLib) shutdown() error {
	if c.set != nil {
		_ = c.set.Free() // Shutdown releases it anyway
		c.set = nil
	}
	return c.errOf(c.l.Shutdown())
}

func (c *cgoLib) watchXid(dev nvmlDevice) error {
	if c.set == nil {
		set, ret := c.l.EventSetCreate()
		if ret != nvml.SUCCESS {
			return c.errOf(ret)
		}
		c.set = set
	}
	return c.errOf(dev.(cgoDevice).d.RegisterEvents(nvml.EventTypeXidCriticalError, c.set))
}

// maxEventsPerRead bounds one drain, so a storm of events cannot hold a
// read; the rest wait for the next.
const maxEventsPerRead = 256

// xidEvents waits 0 ms for each event, so a read never blocks.
func (c *cgoLib) xidEvents() ([]xidEvent, error) {
	if c.set == nil {
		return nil, nil
	}
	var out []xidEvent
	for range maxEventsPerRead {
		e, ret := c.l.EventSetWait(c.set, 0)
		switch {
		case ret == nvml.ERROR_TIMEOUT:
			return out, nil
		case ret != nvml.SUCCESS:
			return out, c.errOf(ret)
		case e.EventType&nvml.EventTypeXidCriticalError == 0 || e.Device == nil:
			continue
		}
		uuid, ret := e.Device.GetUUID()
		if ret != nvml.SUCCESS {
			return out, fmt.Errorf("Xid %d on a device without a UUID: %v", e.EventData, c.errOf(ret))
		}
		out = append(out, xidEvent{uuid: uuid, xid: e.EventData})
	}
	return out, nil
}

func (c *cgoLib) deviceCount() (int, error) {
	n, ret := c.l.DeviceGetCount()
	return n, c.errOf(ret)
}

func (c *cgoLib) device(index int) (nvmlDevice, error) {
	d, ret := c.l.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, c.errOf(ret)
	}
	return cgoDevice{c: c, d: d}, nil
}

func (c *cgoLib) driverVersion() (string, error) {
	v, ret := c.l.SystemGetDriverVersion()
	return v, c.errOf(ret)
}

func (c *cgoLib) cudaVersion() (int, error) {
	v, ret := c.l.SystemGetCudaDriverVersion()
	return v, c.errOf(ret)
}

func (c *cgoLib) processName(pid int) (string, error) {
	v, ret := c.l.SystemGetProcessName(pid)
	return v, c.errOf(ret)
}

// cgoDevice adapts an nvml.Device to nvmlDevice.
type cgoDevice struct {
	c *cgoLib
	d nvml.Device
}

func (d cgoDevice) name() (string, error) {
	v, ret := d.d.GetName()
	return v, d.c.errOf(ret)
}

func (d cgoDevice) uuid() (string, error) {
	v, ret := d.d.GetUUID()
	return v, d.c.errOf(ret)
}

func (d cgoDevice) memory() (uint64, uint64, error) {
	m, ret := d.d.GetMemoryInfo()
	return m.Total, m.Free, d.c.errOf(ret)
}

func (d cgoDevice) computeCap() (int, int, error) {
	major, minor, ret := d.d.GetCudaComputeCapability()
	return major, minor, d.c.errOf(ret)
}

// temperature uses the classic call, deprecated in NVML 13 but present in
// every driver gleaner supports, unlike its versioned successor.
func (d cgoDevice) temperature() (int, error) {
	t, ret := d.d.GetTemperature(nvml.TEMPERATURE_GPU)
	return int(t), d.c.errOf(ret)
}

func (d cgoDevice) powerUsage() (uint32, error) {
	v, ret := d.d.GetPowerUsage()
	return v, d.c.errOf(ret)
}

func (d cgoDevice) powerLimit() (uint32, error) {
	v, ret := d.d.GetEnforcedPowerLimit()
	return v, d.c.errOf(ret)
}

func (d cgoDevice) utilization() (int, error) {
	u, ret := d.d.GetUtilizationRates()
	return int(u.Gpu), d.c.errOf(ret)
}

func (d cgoDevice) computeProcesses() ([]nvmlProc, error) {
	ps, ret := d.d.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil, d.c.errOf(ret)
	}
	out := make([]nvmlProc, len(ps))
	for i, p := range ps {
		out[i] = nvmlProc{pid: p.Pid, usedBytes: p.UsedGpuMemory}
	}
	return out, nil
}

func (d cgoDevice) eccUncorrected() (uint64, error) {
	n, ret := d.d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	return n, d.c.errOf(ret)
}

func (d cgoDevice) migMode() (bool, error) {
	current, _, ret := d.d.GetMigMode()
	return current == nvml.DEVICE_MIG_ENABLE, d.c.errOf(ret)
}
