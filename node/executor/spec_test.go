package executor

import (
	"errors"
	"slices"
	"testing"
)

func TestContainerConfigGPUsAndPolicy(t *testing.T) {
	s := Spec{JobID: "j1", Image: "img", CPUs: 2, MemoryMiB: 1024, Pids: 100,
		GPUUUIDs: []string{"GPU-aaaa", "GPU-bbbb"}, Egress: true, RunAsRoot: true}
	cfg, hc := containerConfig(&s)
	if len(hc.DeviceRequests) != 1 || hc.DeviceRequests[0].Driver != "nvidia" ||
		!slices.Equal(hc.DeviceRequests[0].DeviceIDs, s.GPUUUIDs) {
		t.Fatalf("device requests %+v", hc.DeviceRequests)
	}
	if hc.NetworkMode != "gleaner-net-j1" || cfg.User != "0:0" || slices.Contains(cfg.Env, EnvSimulatedGPUs+"=1") {
		t.Fatalf("network %s user %s env %v", hc.NetworkMode, cfg.User, cfg.Env)
	}
	if hc.Privileged || hc.CapDrop[0] != "ALL" || !hc.ReadonlyRootfs {
		t.Fatal("root must not loosen the rest of the policy")
	}

	s.SimulatedGPUs, s.Egress, s.RunAsRoot = true, false, false
	cfg, hc = containerConfig(&s)
	if len(hc.DeviceRequests) != 0 || !slices.Contains(cfg.Env, EnvSimulatedGPUs+"=1") || hc.NetworkMode != "none" || cfg.User != "65534:65534" {
		t.Fatalf("simulated: %+v %v %s %s", hc.DeviceRequests, cfg.Env, hc.NetworkMode, cfg.User)
	}
}

func TestSpecValidate(t *testing.T) {
	ok := Spec{JobID: "job-1.a_b", CPUs: 1, MemoryMiB: 1, Pids: 1}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Spec){
		"no limits":     func(s *Spec) { s.MemoryMiB = 0 },
		"bad id":        func(s *Spec) { s.JobID = "../x" },
		"relative ckpt": func(s *Spec) { s.CheckpointPath = "ckpt" },
		"ckpt on /tmp":  func(s *Spec) { s.CheckpointPath = "/tmp/" },
		"negative ckpt": func(s *Spec) { s.CheckpointMiB = -1 },
		"negative shm":  func(s *Spec) { s.ShmMiB = -1 },
		"negative tmp":  func(s *Spec) { s.ScratchMiB = -1 },
		"reserved env":  func(s *Spec) { s.Env = map[string]string{EnvSimulatedGPUs: "0"} },
		"secret shadows env": func(s *Spec) {
			s.Env, s.Secrets = map[string]string{"K": "1"}, Secrets{"K": "2"}
		},
	} {
		s := ok
		mutate(&s)
		if err := s.validate(); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
