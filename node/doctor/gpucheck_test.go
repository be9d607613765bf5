package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/attest"
)

// realSource is an inventory of GPUs that are not simulated: what NVML
// gives on a real host.
type realSource struct{ inv attest.Inventory }

func (s realSource) Inventory(context.Context) (attest.Inventory, error) { return s.inv.Clone(), nil }
func (s realSource) Close() error                                        { return nil }

func twoH100s() realSource {
	return realSource{attest.Inventory{Source: "nvml", DriverVersion: "550.54", CUDAVersion: "12.4", GPUs: []attest.GPU{
		{Index: 0, UUID: "GPU-11111111-0000-0000-0000-000000000000", Name: "NVIDIA H100", Model: "H100", VRAMMiB: 81559, VRAMFreeMiB: 81000, UtilPct: 3, PowerW: 70, TempC: 31},
		{Index: 1, UUID: "GPU-22222222-0000-0000-0000-000000000000", Name: "NVIDIA H100", Model: "H100", VRAMMiB: 81559, VRAMFreeMiB: 81559},
	}}}
}

// TestGPUCheckNoGPU is the path this machine takes: NVML finds nothing,
// so the check skips with the line make gpu-check prints, and passes.
func TestGPUCheckNoGPU(t *testing.T) {
	for name, open := range map[string]func() (attest.Source, error){
		"real NVML": attest.NewNVML, // no driver here (or a cgo-less build): ErrNoGPU
		"fake": func() (attest.Source, error) {
			return nil, fmt.Errorf("%w: libnvidia-ml.so.1 not found", attest.ErrNoGPU)
		},
	} {
		r := GPUCheck(context.Background(), GPUCheckOptions{Image: "cuda:test", Source: open, Docker: &fakeDocker{}})
		if !r.Skipped || Failed(r.Checks) || len(r.Checks) != 1 || !strings.HasPrefix(r.Checks[0].Detail, NoGPUSkipped) {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

func TestGPUCheck(t *testing.T) {
	const img = "cuda:test"
	rt := []string{"nvidia", "runc"}
	lone := "GPU 0: NVIDIA H100 (UUID: GPU-11111111-0000-0000-0000-000000000000)\n"
	other := "GPU 0: NVIDIA H100 (UUID: GPU-22222222-0000-0000-0000-000000000000)\n"
	sim, _ := attest.NewSimulated("1xRTX4090")
	for _, tc := range []struct {
		name   string
		src    attest.Source
		openE  error
		d      *fakeDocker
		want   map[string]string // check name -> status
		fail   bool
		detail string
	}{
		{"all pass", twoH100s(), nil, &fakeDocker{rts: rt, images: map[string]bool{img: true}, gpuOut: lone},
			map[string]string{"inventory": StatusPass, "telemetry": StatusPass, "leased container": StatusPass}, false, "sees that GPU alone of the host's 2"},
		{"container sees both", twoH100s(), nil, &fakeDocker{rts: rt, images: map[string]bool{img: true}, gpuOut: lone + other},
			map[string]string{"leased container": StatusFail}, true, "leased 1 GPU, the container sees 2"},
		{"container sees another", twoH100s(), nil, &fakeDocker{rts: rt, images: map[string]bool{img: true}, gpuOut: other},
			map[string]string{"leased container": StatusFail}, true, "sees another"},
		{"container fails", twoH100s(), nil, &fakeDocker{rts: rt, images: map[string]bool{img: true}, gpuErr: errors.New("unknown device")},
			map[string]string{"leased container": StatusFail}, true, "unknown device"},
		{"no nvidia runtime", twoH100s(), nil, &fakeDocker{rts: []string{"runc"}},
			map[string]string{"telemetry": StatusPass, "leased container": StatusSkip}, false, "no nvidia runtime"},
		{"no docker", twoH100s(), nil, &fakeDocker{vErr: errors.New("connection refused")},
			map[string]string{"leased container": StatusSkip}, false, "unreachable"},
		{"image absent", twoH100s(), nil, &fakeDocker{rts: rt, images: map[string]bool{}},
			map[string]string{"leased container": StatusWarn}, false, "not on this host"},
		{"simulated is not real", sim, nil, &fakeDocker{rts: rt},
			map[string]string{"inventory": StatusFail}, true, "simulated"},
		{"NVML broken", nil, errors.New("driver/library version mismatch"), &fakeDocker{},
			map[string]string{"inventory": StatusFail}, true, "mismatch"},
	} {
		open := func() (attest.Source, error) { return tc.src, tc.openE }
		r := GPUCheck(context.Background(), GPUCheckOptions{Image: img, Source: open, Docker: tc.d})
		if r.Skipped || Failed(r.Checks) != tc.fail {
			t.Errorf("%s: skipped %v, failed %v, want failed %v: %+v", tc.name, r.Skipped, Failed(r.Checks), tc.fail, r.Checks)
		}
		var details []string
		for name, want := range tc.want {
			if c := byName(r.Checks, name); c.Status != want {
				t.Errorf("%s: %s is %s, want %s: %+v", tc.name, name, c.Status, want, c)
			}
		}
		for _, c := range r.Checks {
			details = append(details, c.Detail)
			if c.Status == StatusFail && c.Fix == "" {
				t.Errorf("%s: %s failed without a fix", tc.name, c.Name)
			}
		}
		if !strings.Contains(strings.Join(details, "\n"), tc.detail) {
			t.Errorf("%s: no %q in %q", tc.name, tc.detail, details)
		}
		// The container is only ever asked for the one leased GPU.
		for _, u := range tc.d.gpuUUIDs {
			if !slices.Equal(u, []string{"GPU-11111111-0000-0000-0000-000000000000"}) {
				t.Errorf("%s: container asked for %v", tc.name, u)
			}
		}
	}
}

func TestJudgeLeasedContainerOneGPUHost(t *testing.T) {
	c := judgeLeasedContainer(Check{Name: "leased container"}, "GPU-1", 1, "GPU 0: NVIDIA L4 (UUID: GPU-1)\n", nil)
	if c.Status != StatusPass || !strings.Contains(c.Detail, "not that others stay hidden") {
		t.Fatalf("%+v", c)
	}
}
