// Package attest owns what gleaner knows about the GPUs it sells: their
// inventory (NVML on real hardware, a labelled simulation elsewhere), and,
// in later work, telemetry sampling, signed telemetry chains and hardware
// claims. It is a leaf: it imports nothing else of gleaner.
package attest

import (
	"context"
	"errors"
)

// GPU is one device as the inventory sees it at one moment.
type GPU struct {
	Index       int       `json:"index"`
	UUID        string    `json:"uuid"`
	Model       string    `json:"model"` // canonical short model, e.g. "RTX4090", "A100-80GB", "H100"
	Name        string    `json:"name"`  // the driver's full name, e.g. "NVIDIA GeForce RTX 4090"
	VRAMMiB     int       `json:"vram_mib"`
	VRAMFreeMiB int       `json:"vram_free_mib"`
	ComputeCap  string    `json:"compute_capability"` // "8.9"
	TempC       int       `json:"temperature_c"`
	PowerW      float64   `json:"power_w"`
	PowerLimitW float64   `json:"power_limit_w"`
	UtilPct     int       `json:"utilization_pct"`
	Processes   []Process `json:"processes,omitempty"`
	// ProcessesUnknown is true when the driver would not list the GPU's
	// compute processes. Owner control then cannot tell whether the owner
	// is using it, so Withdrawn treats it as busy.
	ProcessesUnknown bool `json:"processes_unknown,omitempty"`
	// Health is what the driver reports of the GPU's soundness (Xid
	// errors, uncorrected ECC errors); see health.go.
	Health Health `json:"health,omitzero"`
	// MIG is true when the GPU is in MIG mode. It is then not offered:
	// its instances are not units of sale yet (see health.go).
	MIG bool `json:"mig,omitempty"`
	// Simulated is true when no real device backs this GPU. It travels in
	// every offer and output; a simulated GPU never passes as real.
	Simulated bool `json:"simulated"`
}

// Process is a compute process running on a GPU.
type Process struct {
	PID     int    `json:"pid"`
	UsedMiB int    `json:"used_mib"`
	Name    string `json:"name,omitempty"`
}

// Inventory is a snapshot of the machine's GPUs.
type Inventory struct {
	GPUs          []GPU  `json:"gpus"`
	DriverVersion string `json:"driver_version,omitempty"`
	CUDAVersion   string `json:"cuda_version,omitempty"`
	Simulated     bool   `json:"simulated"`
	Source        string `json:"source"` // "nvml", "simulated" or "fake"
	// Warnings are readings the driver refused (a sensor it does not
	// support, a device it could not open). They do not fail the snapshot:
	// the node logs them and sells what it could read.
	Warnings []string `json:"warnings,omitempty"`
}

// Clone returns a deep copy, so a snapshot handed to another goroutine
// shares no slices with the source that keeps updating its own.
func (inv Inventory) Clone() Inventory {
	out := inv
	out.Warnings = append([]string(nil), inv.Warnings...)
	if inv.GPUs != nil {
		out.GPUs = make([]GPU, len(inv.GPUs))
		for i, g := range inv.GPUs {
			g.Processes = append([]Process(nil), g.Processes...)
			out.GPUs[i] = g
		}
	}
	return out
}

// Source reads the GPU inventory. Implementations: NVML (real GPUs),
// Simulated (labelled stand-ins for machines without one), Fake (tests).
type Source interface {
	Inventory(ctx context.Context) (Inventory, error)
	Close() error
}

// ErrNoGPU means the machine has no usable NVIDIA GPU (no driver library,
// or no device). It is not a failure of the node: it simply has none to sell.
var ErrNoGPU = errors.New("no NVIDIA GPU found")

// Limits are the owner's ceilings; a GPU over them is withdrawn from offers.
type Limits struct {
	MaxTempC  int     `json:"max_temperature_c,omitempty"` // 0 = no limit
	MaxPowerW float64 `json:"max_power_w,omitempty"`       // 0 = no limit
	// The hard limits: over them even a silver or gold job on the GPU is
	// stopped with its notice (over the limits above, a GPU only leaves
	// the offer and its bronze jobs are preempted). 0 = none.
	StopTempC  int     `json:"stop_temperature_c,omitempty"`
	StopPowerW float64 `json:"stop_power_w,omitempty"`
}
