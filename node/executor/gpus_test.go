package executor

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// envValues returns the values of name in env, in order: more than one would
// leave the winner to whoever reads it.
func envValues(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			out = append(out, v)
		}
	}
	return out
}

// TestContainerGetsExactlyLeasedGPUs: one GPU, two, and a MIG instance
// are asked for by UUID, the IDs exactly the leased ones, with no count
// and no "all" anywhere in the request or the toolkit's environment.
func TestContainerGetsExactlyLeasedGPUs(t *testing.T) {
	for name, uuids := range map[string][]string{
		"one GPU":      {"GPU-5f0b3a2e-8c1d-4e7f-9a6b-1c2d3e4f5a6b"},
		"two GPUs":     {"GPU-aaaaaaaa-0000-0000-0000-000000000001", "GPU-aaaaaaaa-0000-0000-0000-000000000002"},
		"MIG instance": {"MIG-3c1e7a9b-2d4f-5e6a-8b7c-9d0e1f2a3b4c"},
		"old MIG form": {"MIG-GPU-5f0b3a2e-8c1d-4e7f-9a6b-1c2d3e4f5a6b/1/0"},
	} {
		s := Spec{JobID: "j1", Image: "img", CPUs: 1, MemoryMiB: 512, Pids: 64, GPUUUIDs: uuids}
		if err := s.validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg, hc := containerConfig(&s)
		if len(hc.DeviceRequests) != 1 {
			t.Fatalf("%s: %d device requests, want 1: %+v", name, len(hc.DeviceRequests), hc.DeviceRequests)
		}
		r := hc.DeviceRequests[0]
		if r.Driver != "nvidia" || r.Count != 0 || !slices.Equal(r.DeviceIDs, uuids) ||
			len(r.Capabilities) != 1 || !slices.Equal(r.Capabilities[0], []string{"gpu"}) {
			t.Errorf("%s: request %+v, want nvidia, no count, IDs %v, [[gpu]]", name, r, uuids)
		}
		vis := envValues(cfg.Env, "NVIDIA_VISIBLE_DEVICES")
		if len(vis) != 1 || vis[0] != strings.Join(uuids, ",") {
			t.Errorf("%s: NVIDIA_VISIBLE_DEVICES %q, want exactly the leased UUIDs", name, vis)
		}
		if caps := envValues(cfg.Env, "NVIDIA_DRIVER_CAPABILITIES"); len(caps) != 1 || caps[0] != "compute,utility" {
			t.Errorf("%s: NVIDIA_DRIVER_CAPABILITIES %q", name, caps)
		}
		for _, id := range append(r.DeviceIDs, vis...) {
			if strings.EqualFold(id, "all") || strings.Contains(id, "all,") || strings.HasSuffix(id, ",all") {
				t.Errorf("%s: %q asks for all GPUs", name, id)
			}
		}
	}
}

// TestNoGPUsMeansNoDevices: simulated GPUs and jobs without GPUs get no
// device request, and "void" overrides an image's NVIDIA_VISIBLE_DEVICES=all
// for a default nvidia runtime; simulated ones stay labelled simulated.
func TestNoGPUsMeansNoDevices(t *testing.T) {
	sim := Spec{JobID: "j1", Image: "img", CPUs: 1, MemoryMiB: 512, Pids: 64,
		GPUUUIDs: []string{"SIM-0a1b2c3d-0000-0000-0000-000000000000"}, SimulatedGPUs: true}
	none := Spec{JobID: "j2", Image: "img", CPUs: 1, MemoryMiB: 512, Pids: 64}
	for name, s := range map[string]*Spec{"simulated": &sim, "no GPUs": &none} {
		if err := s.validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg, hc := containerConfig(s)
		if len(hc.DeviceRequests) != 0 {
			t.Errorf("%s: device requests %+v", name, hc.DeviceRequests)
		}
		if vis := envValues(cfg.Env, "NVIDIA_VISIBLE_DEVICES"); !slices.Equal(vis, []string{"void"}) {
			t.Errorf("%s: NVIDIA_VISIBLE_DEVICES %q, want [void]", name, vis)
		}
		if got := envValues(cfg.Env, EnvSimulatedGPUs); s.SimulatedGPUs != slices.Equal(got, []string{"1"}) {
			t.Errorf("%s: %s=%q", name, EnvSimulatedGPUs, got)
		}
	}
}

// TestSpecEnvCannotWidenGPUs: a job's env (or secret) naming the
// toolkit's variables is refused, so it can neither add GPUs to a real
// lease nor give a simulated or GPU-less job real ones; CUDA_VISIBLE_DEVICES,
// which only narrows inside the container, stays allowed.
func TestSpecEnvCannotWidenGPUs(t *testing.T) {
	base := Spec{JobID: "j1", Image: "img", CPUs: 1, MemoryMiB: 512, Pids: 64,
		GPUUUIDs: []string{"GPU-aaaaaaaa-0000-0000-0000-000000000001"}}
	for _, name := range []string{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_GDS"} {
		for _, sim := range []bool{false, true} {
			s := base
			s.SimulatedGPUs = sim
			s.Env = map[string]string{name: "all"}
			if err := s.validate(); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), name) {
				t.Errorf("env %s (simulated %v): %v", name, sim, err)
			}
			s.Env, s.Secrets = nil, Secrets{name: "all"}
			if err := s.validate(); !errors.Is(err, ErrBadSpec) {
				t.Errorf("secret %s: %v", name, err)
			}
		}
	}
	s := base
	s.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_TF32_OVERRIDE": "0"}
	if err := s.validate(); err != nil {
		t.Fatalf("CUDA_VISIBLE_DEVICES: %v", err)
	}
	cfg, hc := containerConfig(&s)
	if vis := envValues(cfg.Env, "NVIDIA_VISIBLE_DEVICES"); !slices.Equal(vis, base.GPUUUIDs) ||
		!slices.Equal(hc.DeviceRequests[0].DeviceIDs, base.GPUUUIDs) {
		t.Errorf("visible %q, request %v", vis, hc.DeviceRequests[0].DeviceIDs)
	}
}

// TestGPUIDsAreOneUUIDEach: Docker joins the IDs with commas, so an ID
// that is not exactly one UUID could name more devices than were leased.
func TestGPUIDsAreOneUUIDEach(t *testing.T) {
	for _, id := range []string{"all", "0", "GPU-aaaa,all", "GPU-aaaa,GPU-bbbb", "none", "void", "", "GPU-", "gpu-aaaa", "GPU-aa aa", "SIM-0a1b"} {
		s := Spec{JobID: "j1", Image: "img", CPUs: 1, MemoryMiB: 512, Pids: 64, GPUUUIDs: []string{id}}
		if err := s.validate(); !errors.Is(err, ErrBadSpec) {
			t.Errorf("real GPU %q: %v", id, err)
		}
	}
	s := Spec{JobID: "j1", Image: "img", CPUs: 1, MemoryMiB: 512, Pids: 64, SimulatedGPUs: true, GPUUUIDs: []string{"SIM-a,SIM-b"}}
	if err := s.validate(); !errors.Is(err, ErrBadSpec) {
		t.Errorf("simulated ID with a comma: %v", err)
	}
}
