package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// leasedContainerCheck runs nvidia-smi -L in a container given only the
// GPU uuid, as the executor gives a job its lease, and passes when it
// lists that GPU and no other. hostGPUs is how many the host has: with
// one, the check shows the request works but cannot show others hidden.
func leasedContainerCheck(ctx context.Context, o GPUCheckOptions, uuid string, hostGPUs int) Check {
	c := Check{Name: "leased container"}
	d := o.Docker
	if d == nil {
		e, err := newDockerProbe()
		if err != nil {
			c.Status, c.Detail = StatusSkip, "skipped: Docker client: "+err.Error()
			return c
		}
		defer e.Close()
		d = e
	}
	if _, err := d.version(ctx); err != nil {
		c.Status, c.Detail = StatusSkip, "skipped: Docker is unreachable ("+err.Error()+")"
		return c
	}
	info, err := d.info(ctx)
	if rt := runtimeCheck(info, err, true); rt.Status != StatusPass {
		c.Status, c.Detail, c.Fix = StatusSkip, "skipped: "+rt.Detail, rt.Fix
		return c
	}
	if ok, err := d.hasImage(ctx, o.Image); err != nil || !ok {
		c.Status, c.Detail = StatusWarn, "not run: image "+o.Image+" is not on this host (never pulled)"
		c.Fix = "docker pull " + o.Image + " and run it again, or pass --gpu-image with a local image that has nvidia-smi"
		return c
	}
	rctx, cancel := context.WithTimeout(ctx, gpuContainerTimeout)
	defer cancel()
	out, err := d.runGPU(rctx, o.Image, []string{uuid})
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v", gpuContainerTimeout)
	}
	return judgeLeasedContainer(c, uuid, hostGPUs, out, err)
}

// judgeLeasedContainer reads nvidia-smi -L's output: one "GPU n: ...
// (UUID: ...)" line, naming uuid.
func judgeLeasedContainer(c Check, uuid string, hostGPUs int, out string, err error) Check {
	c.Status = StatusFail
	c.Fix = "check the NVIDIA Container Toolkit: docker run --rm --gpus '\"device=" + uuid + "\"' IMAGE nvidia-smi -L must list that GPU alone"
	if err != nil {
		c.Detail = "a container on GPU " + uuid + " failed: " + err.Error()
		return c
	}
	var gpus []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "GPU ") {
			gpus = append(gpus, l)
		}
	}
	switch {
	case len(gpus) == 0:
		c.Detail = "nvidia-smi in the container sees no GPU: " + strings.TrimSpace(out)
	case len(gpus) > 1:
		c.Detail = fmt.Sprintf("leased 1 GPU, the container sees %d: %s", len(gpus), strings.Join(gpus, "; "))
	case !strings.Contains(gpus[0], "UUID: "+uuid+")"):
		c.Detail = "leased " + uuid + ", the container sees another: " + gpus[0]
	default:
		c.Status, c.Fix = StatusPass, ""
		c.Detail = "a container on " + uuid + " sees that GPU alone"
		if hostGPUs < 2 {
			c.Detail += " (the host has 1 GPU, so this shows the request works, not that others stay hidden)"
		} else {
			c.Detail += fmt.Sprintf(" of the host's %d", hostGPUs)
		}
	}
	return c
}
