//go:build !cgo

package attest

import "fmt"

// NewNVML would open the NVIDIA driver, but go-nvml is cgo and this binary
// was built with CGO_ENABLED=0, so it reports no GPU rather than failing
// to build: a cgo-free build is still a working node for simulated GPUs.
func NewNVML() (Source, error) {
	return nil, fmt.Errorf("%w: gleaner was built without cgo, which NVML needs", ErrNoGPU)
}
