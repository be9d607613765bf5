package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
)

// nvmlReport is what doctor reads of the driver.
type nvmlReport struct {
	Driver, CUDA string
	GPUs         []string // model names, one per device
	Simulated    bool     // never true from NVML; checked so it can never pass as real
	// Devices are the GPUs as read, for their MIG mode and health
	// (doctor_gpu_health.go).
	Devices []attest.GPU
}

// readNVML opens the real driver, as the node does to sell GPUs.
func readNVML(ctx context.Context) (nvmlReport, error) {
	src, err := attest.NewNVML()
	if err != nil {
		return nvmlReport{}, err
	}
	defer src.Close()
	inv, err := src.Inventory(ctx)
	if err != nil {
		return nvmlReport{}, err
	}
	return reportOf(inv), nil
}

// reportOf is doctor's report of an inventory.
func reportOf(inv attest.Inventory) nvmlReport {
	r := nvmlReport{Driver: inv.DriverVersion, CUDA: inv.CUDAVersion, Simulated: inv.Simulated, Devices: inv.GPUs}
	for _, g := range inv.GPUs {
		r.GPUs = append(r.GPUs, g.Name)
		r.Simulated = r.Simulated || g.Simulated
	}
	return r
}

const simulatedOnly = "this host can only offer simulated GPUs (labelled simulated)"

// gpuChecks checks the driver, Docker's NVIDIA runtime and, where that
// exists, a GPU inside a test container. d is nil when Docker is
// unreachable.
func gpuChecks(ctx context.Context, o Options, d dockerProbe) []Check {
	read := o.NVML
	if read == nil {
		read = func() (nvmlReport, error) { return readNVML(ctx) }
	}
	rep, err := read()
	hasGPU := err == nil && len(rep.GPUs) > 0 && !rep.Simulated
	out := []Check{nvmlCheck(rep, err)}
	if err == nil {
		out = append(out, gpuHealthChecks(rep)...)
	}

	rt := Check{Name: "nvidia runtime"}
	if d == nil {
		rt.Status, rt.Detail = StatusSkip, "skipped: Docker is unreachable (see the docker check)"
		return append(out, rt, gpuContainerSkipped(o.GPUImage, "Docker is unreachable"))
	}
	info, err := d.info(ctx)
	rt = runtimeCheck(info, err, hasGPU)
	if rt.Status != StatusPass {
		return append(out, rt, gpuContainerSkipped(o.GPUImage, "no nvidia runtime in Docker"))
	}
	return append(out, rt, gpuContainer(ctx, d, o.GPUImage))
}

func nvmlCheck(rep nvmlReport, err error) Check {
	c := Check{Name: "gpu"}
	switch {
	case err != nil && (strings.Contains(err.Error(), "counting devices") || strings.Contains(err.Error(), "no devices")):
		c.Status, c.Detail = StatusWarn, "the NVIDIA driver loaded but lists no GPU ("+err.Error()+"); "+simulatedOnly
		c.Fix = "check `nvidia-smi`; to test without a GPU: gleaner daemon --simulate-gpus 1xRTX4090"
	case err != nil:
		c.Status, c.Detail = StatusWarn, "no NVIDIA driver: NVML could not load ("+err.Error()+"); "+simulatedOnly
		c.Fix = "to sell real GPUs install the NVIDIA driver; to test without one: gleaner daemon --simulate-gpus 1xRTX4090"
	case rep.Simulated:
		c.Status, c.Detail = StatusWarn, "the GPUs found are simulated; "+simulatedOnly
		c.Fix = "install the NVIDIA driver to sell real GPUs"
	case len(rep.GPUs) == 0:
		c.Status, c.Detail = StatusWarn, "NVML lists no GPU; "+simulatedOnly
		c.Fix = "check `nvidia-smi`"
	default:
		c.Status = StatusPass
		c.Detail = fmt.Sprintf("%d GPU(s): %s; driver %s, CUDA %s", len(rep.GPUs), strings.Join(rep.GPUs, ", "), rep.Driver, rep.CUDA)
	}
	return c
}

func gpuContainerSkipped(image, why string) Check {
	return Check{Name: "gpu container", Status: StatusSkip,
		Detail: "skipped: " + why + "; it would run nvidia-smi -L in " + image}
}

// gpuContainerTimeout bounds the test container: a cached CUDA base image
// starts in about a second; a hang is a broken toolkit, not a slow one.
const gpuContainerTimeout = 30 * time.Second

func gpuContainer(ctx context.Context, d dockerProbe, image string) Check {
	c := Check{Name: "gpu container"}
	ok, err := d.hasImage(ctx, image)
	if err != nil {
		c.Status, c.Detail, c.Fix = StatusWarn, "inspect "+image+": "+err.Error(), "check the image name (--gpu-image)"
		return c
	}
	if !ok {
		// Doctor never pulls: a CUDA image is hundreds of MB, and a
		// check should not download behind the user's back.
		c.Status = StatusWarn
		c.Detail = "not run: image " + image + " is not on this host (doctor does not pull)"
		c.Fix = "docker pull " + image + " and run doctor again, or pass --gpu-image with a local image that has nvidia-smi"
		return c
	}
	rctx, cancel := context.WithTimeout(ctx, gpuContainerTimeout)
	defer cancel()
	out, err := d.runGPU(rctx, image, nil)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v", gpuContainerTimeout)
		}
		c.Status, c.Detail = StatusFail, "a container with --gpus all in "+image+" failed: "+err.Error()
		c.Fix = "check the NVIDIA Container Toolkit: docker run --rm --gpus all " + image + " nvidia-smi"
		return c
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "GPU ") {
			n++
		}
	}
	if n == 0 {
		c.Status, c.Detail = StatusFail, "nvidia-smi in "+image+" sees no GPU: "+strings.TrimSpace(out)
		c.Fix = "check the NVIDIA Container Toolkit: docker run --rm --gpus all " + image + " nvidia-smi"
		return c
	}
	c.Status, c.Detail = StatusPass, fmt.Sprintf("nvidia-smi in %s sees %d GPU(s)", image, n)
	return c
}
