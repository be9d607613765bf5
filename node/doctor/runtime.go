package doctor

import (
	"slices"
	"strings"

	"github.com/docker/docker/api/types/system"
)

// toolkitFix is what to install when containers cannot be given GPUs. The
// executor asks Docker's nvidia device driver for GPUs by UUID, which
// needs the toolkit's hook (nvidia-container-runtime-hook) on the
// engine's PATH; `nvidia-ctk runtime configure` registers the nvidia
// runtime that doctor looks for as its sign. The CDI spec is for engines
// that use CDI names (nvidia.com/gpu=UUID) as well.
const toolkitFix = "install the NVIDIA Container Toolkit (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html), " +
	"then: sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker; " +
	"for CDI too: sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"

// cdiGPUPrefix starts the CDI names of the toolkit's GPUs.
const cdiGPUPrefix = "nvidia.com/gpu="

// runtimeCheck judges `docker info`: whether the engine has the nvidia
// runtime, and which NVIDIA CDI devices it discovered (Docker 28.2 and
// later list them; older engines only their spec directories). hasGPU
// says whether NVML found a real GPU.
func runtimeCheck(info system.Info, err error, hasGPU bool) Check {
	c := Check{Name: "nvidia runtime"}
	if err != nil {
		c.Status, c.Detail, c.Fix = StatusWarn, "docker info: "+err.Error(), "check that Docker answers `docker info`"
		return c
	}
	var rts, cdi []string
	for name := range info.Runtimes {
		rts = append(rts, name)
	}
	slices.Sort(rts)
	for _, d := range info.DiscoveredDevices {
		if strings.HasPrefix(d.ID, cdiGPUPrefix) {
			cdi = append(cdi, d.ID)
		}
	}
	cdiNote := "no NVIDIA CDI devices"
	switch {
	case len(cdi) > 0:
		cdiNote = "CDI devices: " + strings.Join(cdi, ", ")
	case len(info.CDISpecDirs) > 0:
		cdiNote = "no NVIDIA CDI devices in " + strings.Join(info.CDISpecDirs, ", ")
	}
	if slices.Contains(rts, "nvidia") {
		c.Status = StatusPass
		c.Detail = "Docker has the nvidia runtime (runtimes: " + strings.Join(rts, ", ") + "); " + cdiNote
		return c
	}
	c.Status = StatusWarn
	c.Detail = "Docker has no nvidia runtime (runtimes: " + strings.Join(rts, ", ") + "; " + cdiNote + "), so containers cannot be given GPUs"
	if len(cdi) > 0 {
		c.Detail = "Docker has NVIDIA CDI devices (" + strings.Join(cdi, ", ") + ") but no nvidia runtime; jobs ask for GPUs through the nvidia runtime's hook, not CDI"
	}
	if !hasGPU {
		c.Detail += "; nor does this host have a GPU to give"
	}
	c.Fix = toolkitFix
	return c
}
