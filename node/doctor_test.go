package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/attest"
)

func byName(cs []Check, name string) Check {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return Check{Name: name, Status: "missing"}
}

func TestRepoChecksPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	if _, err := InitRepo(dir, DefaultConfig(NetworkLocal)); err != nil {
		t.Fatal(err)
	}
	if c := RepoChecks(dir)[0]; c.Status != StatusPass {
		t.Fatalf("fresh repo: %+v", c)
	}
	tok := filepath.Join(dir, TokenFile)
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	c := RepoChecks(dir)[0]
	if c.Status != StatusFail || !strings.Contains(c.Detail, TokenFile) || !strings.Contains(c.Fix, "chmod 600 "+tok) {
		t.Errorf("world-readable token: %+v", c)
	}
	_ = os.Chmod(tok, 0o600)
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if c := RepoChecks(dir)[0]; c.Status != StatusFail || !strings.Contains(c.Fix, "chmod 700 "+dir) {
		t.Errorf("group-readable repo dir: %+v", c)
	}
	_ = os.Chmod(dir, 0o700)
	if err := os.Remove(filepath.Join(dir, IdentityFile)); err != nil {
		t.Fatal(err)
	}
	if c := RepoChecks(dir)[0]; c.Status != StatusFail || !strings.Contains(c.Detail, IdentityFile) {
		t.Errorf("missing key: %+v", c)
	}
	if c := RepoChecks(filepath.Join(dir, "nope"))[0]; c.Status != StatusFail || !strings.Contains(c.Fix, "gleaner init") {
		t.Errorf("no repo: %+v", c)
	}
}

func TestJudgeDisk(t *testing.T) {
	const gb = 1 << 30
	for _, tc := range []struct {
		free, total uint64
		quota       int64
		want        string
	}{
		{500 * gb, 1000 * gb, 20 * gb, StatusPass},
		{50 * gb, 1000 * gb, 20 * gb, StatusWarn}, // 5%
		{15 * gb, 100 * gb, 20 * gb, StatusWarn},  // 15%, but under the quota
		{100 << 20, 1000 * gb, 1 * gb, StatusFail},
	} {
		c := judgeDisk("/x", tc.free, tc.total, tc.quota)
		if c.Status != tc.want || (c.Status != StatusPass) != (c.Fix != "") {
			t.Errorf("free %d of %d, quota %d: %+v, want %s", tc.free, tc.total, tc.quota, c, tc.want)
		}
	}
	// The real filesystem: a verdict, never an error, for a temp dir.
	if c := DiskChecks(t.TempDir()); len(c) != 1 || !strings.Contains(c[0].Detail, "free of") {
		t.Errorf("DiskChecks(temp dir) = %+v", c)
	}
}

// fakeDocker is a Docker engine for the checks' logic.
type fakeDocker struct {
	v        dockerVersion
	vErr     error
	rts      []string
	images   map[string]bool
	gpuOut   string
	gpuErr   error
	gpuCalls int
}

func (f *fakeDocker) version(context.Context) (dockerVersion, error) { return f.v, f.vErr }
func (f *fakeDocker) runtimes(context.Context) ([]string, error)     { return f.rts, nil }
func (f *fakeDocker) hasImage(_ context.Context, ref string) (bool, error) {
	return f.images[ref], nil
}
func (f *fakeDocker) runGPU(context.Context, string) (string, error) {
	f.gpuCalls++
	return f.gpuOut, f.gpuErr
}
func (f *fakeDocker) Close() error { return nil }

func TestDockerChecks(t *testing.T) {
	for _, tc := range []struct {
		d    fakeDocker
		want string
	}{
		{fakeDocker{v: dockerVersion{Version: "27.1.0", APIVersion: "1.46"}}, StatusPass},
		{fakeDocker{v: dockerVersion{Version: "19.03.0", APIVersion: "1.40"}}, StatusPass},
		{fakeDocker{v: dockerVersion{Version: "18.09.0", APIVersion: "1.39"}}, StatusFail},
		{fakeDocker{vErr: errors.New("connection refused")}, StatusFail},
	} {
		cs, v := dockerChecks(context.Background(), &tc.d)
		if cs[0].Status != tc.want || (v == nil) != (tc.d.vErr != nil) {
			t.Errorf("%+v: %+v", tc.d.v, cs[0])
		}
		if tc.want == StatusFail && cs[0].Fix == "" {
			t.Errorf("%+v: a failure without a fix", tc.d.v)
		}
	}
}

func TestGPUChecks(t *testing.T) {
	const img = "cuda:test"
	h100 := func() (nvmlReport, error) {
		return nvmlReport{Driver: "550.54", CUDA: "12.4", GPUs: []string{"NVIDIA H100"}}, nil
	}
	noDriver := func() (nvmlReport, error) {
		return nvmlReport{}, fmt.Errorf("%w: libnvidia-ml.so.1 not found", attest.ErrNoGPU)
	}
	sim := func() (nvmlReport, error) {
		return nvmlReport{GPUs: []string{"Simulated RTX4090"}, Simulated: true}, nil
	}
	withRuntime := []string{"nvidia", "runc"}
	for _, tc := range []struct {
		name                 string
		nvml                 func() (nvmlReport, error)
		d                    *fakeDocker
		gpu, rt, ctr         string
		wantRun              int
		detailHas, ctrDetail string
	}{
		{"no driver, no runtime", noDriver, &fakeDocker{rts: []string{"runc"}}, StatusWarn, StatusWarn, StatusSkip, 0, "simulated", img},
		{"simulated never passes", sim, &fakeDocker{rts: withRuntime, images: map[string]bool{img: true}, gpuOut: "GPU 0: x\n"}, StatusWarn, StatusPass, StatusPass, 1, "simulated", "1 GPU"},
		{"no docker", h100, nil, StatusPass, StatusSkip, StatusSkip, 0, "H100", "Docker is unreachable"},
		{"image not here", h100, &fakeDocker{rts: withRuntime, images: map[string]bool{}}, StatusPass, StatusPass, StatusWarn, 0, "550.54", "docker pull"},
		{"container sees GPUs", h100, &fakeDocker{rts: withRuntime, images: map[string]bool{img: true}, gpuOut: "GPU 0: NVIDIA H100 (UUID: GPU-1)\nGPU 1: NVIDIA H100 (UUID: GPU-2)\n"}, StatusPass, StatusPass, StatusPass, 1, "H100", "2 GPU"},
		{"container fails", h100, &fakeDocker{rts: withRuntime, images: map[string]bool{img: true}, gpuErr: errors.New("could not select device driver")}, StatusPass, StatusPass, StatusFail, 1, "H100", "could not select"},
		{"container sees none", h100, &fakeDocker{rts: withRuntime, images: map[string]bool{img: true}, gpuOut: "No devices found\n"}, StatusPass, StatusPass, StatusFail, 1, "H100", "sees no GPU"},
	} {
		var dp dockerProbe
		if tc.d != nil {
			dp = tc.d
		}
		cs := gpuChecks(context.Background(), DoctorOptions{GPUImage: img, NVML: tc.nvml}, dp)
		g, rt, ctr := byName(cs, "gpu"), byName(cs, "nvidia runtime"), byName(cs, "gpu container")
		if g.Status != tc.gpu || rt.Status != tc.rt || ctr.Status != tc.ctr {
			t.Errorf("%s: gpu %s, runtime %s, container %s; want %s %s %s\n%+v", tc.name, g.Status, rt.Status, ctr.Status, tc.gpu, tc.rt, tc.ctr, cs)
		}
		if !strings.Contains(g.Detail, tc.detailHas) || !strings.Contains(ctr.Detail+ctr.Fix, tc.ctrDetail) {
			t.Errorf("%s: gpu %q, container %q %q", tc.name, g.Detail, ctr.Detail, ctr.Fix)
		}
		if tc.d != nil && tc.d.gpuCalls != tc.wantRun {
			t.Errorf("%s: ran the GPU container %d times, want %d", tc.name, tc.d.gpuCalls, tc.wantRun)
		}
	}
}

func TestDaemonChecks(t *testing.T) {
	peerOK := func(skew float64) PeerClock {
		return PeerClock{PeerID: "12D3KooWpeer" + fmt.Sprint(skew), SkewMS: skew, RTTMS: 1}
	}
	base := DoctorResult{Network: NetworkTestnet, ListenAddrs: []string{"/ip4/0.0.0.0/tcp/4030"}, Reachability: "public", Peers: 2}
	for _, tc := range []struct {
		name      string
		clocks    []PeerClock
		maxSkew   float64
		peers     int
		want      string
		detailHas string
	}{
		{"in sync", []PeerClock{peerOK(3), peerOK(-12)}, 12, 2, StatusPass, "12.0 ms over 2"},
		{"drifting", []PeerClock{peerOK(2500)}, 2500, 1, StatusWarn, "2.5 s"},
		{"far off", []PeerClock{peerOK(-45000), peerOK(10)}, 45000, 2, StatusFail, "expired"},
		{"errors are not skew", []PeerClock{{PeerID: "p", Error: "protocol not supported"}, peerOK(1)}, 1, 2, StatusPass, "over 1 peer"},
		{"nobody answers", []PeerClock{{PeerID: "p", Error: "protocol not supported"}}, 0, 1, StatusWarn, "protocol not supported"},
		{"no peers", nil, 0, 0, StatusSkip, "no connected peers"},
	} {
		r := base
		r.Clocks, r.MaxSkewMS, r.Peers = tc.clocks, tc.maxSkew, tc.peers
		c := byName(DaemonChecks(r), "clock")
		if c.Status != tc.want || !strings.Contains(c.Detail, tc.detailHas) {
			t.Errorf("%s: %+v, want %s with %q", tc.name, c, tc.want, tc.detailHas)
		}
	}
	r := base
	r.ListenAddrs = nil
	if c := byName(DaemonChecks(r), "listen"); c.Status != StatusFail {
		t.Errorf("no listen addrs: %+v", c)
	}
	r.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/4030", "/ip6/::1/udp/4030/quic-v1"}
	if c := byName(DaemonChecks(r), "listen"); c.Status != StatusWarn {
		t.Errorf("loopback only on testnet: %+v", c)
	}
	r.Network = NetworkLocal
	if c := byName(DaemonChecks(r), "listen"); c.Status != StatusPass {
		t.Errorf("loopback only on the local network: %+v", c)
	}
	for reach, want := range map[string]string{"public": StatusPass, "private": StatusWarn, "unknown": StatusWarn} {
		r.Reachability = reach
		if c := byName(DaemonChecks(r), "nat"); c.Status != want || (want != StatusPass && c.Fix == "") {
			t.Errorf("reachability %s: %+v", reach, c)
		}
	}
	for _, c := range DaemonSkipped("daemon not running") {
		if c.Status != StatusSkip || c.Detail != "skipped: daemon not running" {
			t.Errorf("DaemonSkipped: %+v", c)
		}
	}
}
