package attest

import "strings"

// The NVIDIA Container Toolkit decides which devices a container gets
// partly from the container's own environment: NVIDIA_VISIBLE_DEVICES=all
// in a container with no GPU request hands it every GPU on the host where
// nvidia is Docker's default runtime, and the other names below mount
// more devices (MIG control, IMEX channels, GPUDirect, NVSwitch) or drop
// the driver's checks. A job spec therefore may not set any of them: the
// renter refuses them where the spec is written (auction), and the
// provider's executor refuses them again and sets the first two itself
// (node/executor/gpus.go). CUDA_VISIBLE_DEVICES is not among them: CUDA
// applies it inside the container, to the GPUs the container already has,
// so it can only narrow or reorder them.
var runtimeEnv = []string{
	"NVIDIA_VISIBLE_DEVICES",
	"NVIDIA_DRIVER_CAPABILITIES",
	"NVIDIA_MIG_CONFIG_DEVICES",
	"NVIDIA_MIG_MONITOR_DEVICES",
	"NVIDIA_IMEX_CHANNELS",
	"NVIDIA_GDS",
	"NVIDIA_MOFED",
	"NVIDIA_NVSWITCH",
	"NVIDIA_GDRCOPY",
	"NVIDIA_DISABLE_REQUIRE",
}

// runtimeEnvPrefix covers NVIDIA_REQUIRE_CUDA, NVIDIA_REQUIRE_DRIVER and
// the rest of the toolkit's requirement checks.
const runtimeEnvPrefix = "NVIDIA_REQUIRE_"

// IsGPURuntimeEnv reports whether name is an environment variable the
// NVIDIA Container Toolkit reads to choose a container's devices, which a
// job must not set.
func IsGPURuntimeEnv(name string) bool {
	for _, n := range runtimeEnv {
		if name == n {
			return true
		}
	}
	return strings.HasPrefix(name, runtimeEnvPrefix)
}
