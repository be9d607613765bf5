package executor

import (
	"regexp"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/gleaner-net/gleaner/attest"
)

// A container gets exactly the leased GPUs, by UUID. Docker's nvidia
// device driver joins a request's DeviceIDs with commas into
// NVIDIA_VISIBLE_DEVICES for the NVIDIA Container Toolkit, which mounts
// those devices and no others. Three things could widen that, and each is
// closed here:
//
//   - a count: Count -1 (`--gpus all`) is every GPU on the host. The
//     request names DeviceIDs and never a count.
//   - an ID that is not one UUID: "all", an index, or "GPU-a,GPU-b" that
//     the join splits in two. Each ID must be one GPU-... or MIG-... UUID.
//   - the environment: the toolkit also reads NVIDIA_VISIBLE_DEVICES from
//     the container's environment, and nvidia/cuda images set it to "all"
//     in their ENV, so where nvidia is Docker's default runtime a container
//     with no request would get every GPU. The spec may not set the
//     toolkit's variables (attest.IsGPURuntimeEnv; validate refuses them),
//     and the executor sets NVIDIA_VISIBLE_DEVICES and
//     NVIDIA_DRIVER_CAPABILITIES itself, which overrides the image's ENV:
//     the leased UUIDs, or "void" (the toolkit's "no GPU at all") for a job
//     with simulated GPUs or none.
//
// The request uses Docker's nvidia driver, not CDI names
// (nvidia.com/gpu=UUID): it works on every engine from API 1.40 (Docker
// 19.03) with the toolkit installed, where a CDI request needs Docker 25
// or newer with CDI enabled and a generated spec. Doctor reports both
// (node/doctor_gpu.go).
const (
	noGPUs = "void"
	// gpuCapabilities are the driver capabilities a job gets: CUDA and
	// nvidia-smi, not graphics, video or display.
	gpuCapabilities = "compute,utility"
)

// gpuUUIDPattern is one NVML UUID: GPU-<hex and dashes>, or a MIG
// instance as MIG-<uuid> (R470 and later) or MIG-GPU-<uuid>/<gi>/<ci>
// (older drivers).
var gpuUUIDPattern = regexp.MustCompile(`^(GPU|MIG)-[A-Za-z0-9][A-Za-z0-9/-]{0,127}$`)

// validateGPUs refuses GPU IDs that could name more than one device, and
// job env that would choose devices for the toolkit.
func (s *Spec) validateGPUs(bad func(string, ...any) error) error {
	for _, u := range s.GPUUUIDs {
		// Simulated UUIDs (SIM-...) reach no device request; they only
		// need to survive the comma-joined GLEANER_GPU_UUIDS.
		if s.SimulatedGPUs && u != "" && !strings.ContainsAny(u, ", \t\n") {
			continue
		}
		if !gpuUUIDPattern.MatchString(u) {
			return bad("GPU %q is not one GPU-... or MIG-... UUID", u)
		}
	}
	for _, m := range []map[string]string{s.Env, s.Secrets} {
		for k := range m {
			if attest.IsGPURuntimeEnv(k) {
				return bad("env %s: the provider sets which GPUs a job sees; a spec may not", k)
			}
		}
	}
	return nil
}

// gpuDeviceRequests is what Docker is asked for: the leased UUIDs, or
// nothing for simulated GPUs and jobs without GPUs.
func (s *Spec) gpuDeviceRequests() []container.DeviceRequest {
	if s.SimulatedGPUs {
		return nil
	}
	reqs, _ := GPUContainer(s.GPUUUIDs)
	return reqs
}

// gpuEnv is the toolkit's environment, the same the device request
// produces, set so that the image's ENV cannot say otherwise.
func (s *Spec) gpuEnv() []string {
	if s.SimulatedGPUs {
		return []string{"NVIDIA_VISIBLE_DEVICES=" + noGPUs}
	}
	_, env := GPUContainer(s.GPUUUIDs)
	return env
}

// GPUContainer is how a container is given exactly the real GPUs uuids
// (none when empty): the device requests for its HostConfig and the
// environment to append to its Config. Jobs get theirs through Start;
// doctor's checks use this to test the same request.
func GPUContainer(uuids []string) ([]container.DeviceRequest, []string) {
	if len(uuids) == 0 {
		return nil, []string{"NVIDIA_VISIBLE_DEVICES=" + noGPUs}
	}
	return []container.DeviceRequest{{
			Driver:       "nvidia",
			DeviceIDs:    append([]string(nil), uuids...),
			Capabilities: [][]string{{"gpu"}},
		}}, []string{
			"NVIDIA_DRIVER_CAPABILITIES=" + gpuCapabilities,
			"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ","),
		}
}
