package doctor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
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
	if _, err := repo.InitRepo(dir, repo.DefaultConfig(repo.NetworkLocal)); err != nil {
		t.Fatal(err)
	}
	if c := RepoChecks(dir)[0]; c.Status != StatusPass {
		t.Fatalf("fresh repo: %+v", c)
	}
	tok := filepath.Join(dir, repo.TokenFile)
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	c := RepoChecks(dir)[0]
	if c.Status != StatusFail || !strings.Contains(c.Detail, repo.TokenFile) || !strings.Contains(c.Fix, "chmod 600 "+tok) {
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
	if err := os.Remove(filepath.Join(dir, repo.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	if c := RepoChecks(dir)[0]; c.Status != StatusFail || !strings.Contains(c.Detail, repo.IdentityFile) {
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
		c := judgeDisk("/x", tc.free, tc.total, tc.quota, 0)
		if c.Status != tc.want || (c.Status != StatusPass) != (c.Fix != "") {
			t.Errorf("free %d of %d, quota %d: %+v, want %s", tc.free, tc.total, tc.quota, c, tc.want)
		}
	}
	// What the store already holds it need not grow by: 15 GiB free with
	// 10 of a 20 GiB quota in use passes; with 4 in use it warns, and names
	// the 16 GiB still to come; past its quota it needs nothing more.
	for _, tc := range []struct {
		held int64
		want string
	}{{10 * gb, StatusPass}, {4 * gb, StatusWarn}, {25 * gb, StatusPass}} {
		c := judgeDisk("/x", 15*gb, 100*gb, 20*gb, tc.held)
		if c.Status != tc.want || (tc.want == StatusWarn && !strings.Contains(c.Fix, "16.0 GiB more")) {
			t.Errorf("15 GiB free, quota 20 GiB, %d held: %+v, want %s", tc.held, c, tc.want)
		}
	}
	// The real filesystem: a verdict, never an error, for a temp dir.
	if c := DiskChecks(t.TempDir()); len(c) != 1 || !strings.Contains(c[0].Detail, "free of") {
		t.Errorf("DiskChecks(temp dir) = %+v", c)
	}
	// DiskChecks counts <repo>/data: with a quota 5 GiB past the free
	// space, an empty store warns, and one already holding 6 GiB (a sparse
	// file: its size is what the walk counts) does not.
	repoDir := filepath.Join(t.TempDir(), "repo")
	free, total, err := diskSpace(filepath.Dir(repoDir))
	if err != nil {
		t.Fatal(err)
	}
	if free < 2*gb || float64(free) < 2*diskWarnFraction*float64(total) {
		t.Skipf("too little free space here (%d of %d) for the quota test", free, total)
	}
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.Data.QuotaGiB = int(free/gb) + 5
	if _, err := repo.InitRepo(repoDir, cfg); err != nil {
		t.Fatal(err)
	}
	if c := DiskChecks(repoDir); c[0].Status != StatusWarn || !strings.Contains(c[0].Fix, "quota") {
		t.Errorf("empty store, quota past the free space: %+v", c)
	}
	dataDir := filepath.Join(repoDir, repo.DataDir, "sub")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dataDir, "000001.ldb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(6 * gb); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if got := dirBytes(filepath.Join(repoDir, repo.DataDir)); got != 6*gb {
		t.Errorf("dirBytes = %d, want %d", got, 6*gb)
	}
	if c := DiskChecks(repoDir); c[0].Status != StatusPass || !strings.Contains(c[0].Detail, "6.0 GiB of it in use") {
		t.Errorf("store holding 6 GiB of a quota 5 GiB past the free space: %+v", c)
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
	gpuUUIDs [][]string // what each runGPU asked for
}

func (f *fakeDocker) version(context.Context) (dockerVersion, error) { return f.v, f.vErr }
func (f *fakeDocker) info(context.Context) (system.Info, error) {
	info := system.Info{Runtimes: map[string]system.RuntimeWithStatus{}}
	for _, r := range f.rts {
		info.Runtimes[r] = system.RuntimeWithStatus{}
	}
	return info, nil
}
func (f *fakeDocker) hasImage(_ context.Context, ref string) (bool, error) {
	return f.images[ref], nil
}
func (f *fakeDocker) runGPU(_ context.Context, _ string, uuids []string) (string, error) {
	f.gpuCalls++
	f.gpuUUIDs = append(f.gpuUUIDs, uuids)
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
		cs := gpuChecks(context.Background(), Options{GPUImage: img, NVML: tc.nvml}, dp)
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

// TestRuntimeCheck judges `docker info` as the engine gives it: the
// nvidia runtime present, absent, present only as CDI devices, and no
// answer; every warning says what to install.
func TestRuntimeCheck(t *testing.T) {
	rt := func(names ...string) map[string]system.RuntimeWithStatus {
		m := map[string]system.RuntimeWithStatus{}
		for _, n := range names {
			m[n] = system.RuntimeWithStatus{}
		}
		return m
	}
	cdi := []system.DeviceInfo{{Source: "cdi", ID: "nvidia.com/gpu=0"}, {Source: "cdi", ID: "nvidia.com/gpu=GPU-1"}, {Source: "cdi", ID: "vendor.com/x=1"}}
	for _, tc := range []struct {
		name      string
		info      system.Info
		err       error
		hasGPU    bool
		want      string
		detailHas []string
	}{
		{"runtime present", system.Info{Runtimes: rt("runc", "nvidia")}, nil, true, StatusPass, []string{"runtimes: nvidia, runc", "no NVIDIA CDI devices"}},
		{"runtime and CDI", system.Info{Runtimes: rt("runc", "nvidia"), CDISpecDirs: []string{"/etc/cdi"}, DiscoveredDevices: cdi}, nil, true, StatusPass, []string{"CDI devices: nvidia.com/gpu=0, nvidia.com/gpu=GPU-1"}},
		{"runtime absent", system.Info{Runtimes: rt("runc"), CDISpecDirs: []string{"/etc/cdi", "/var/run/cdi"}}, nil, true, StatusWarn, []string{"no nvidia runtime", "no NVIDIA CDI devices in /etc/cdi, /var/run/cdi"}},
		{"absent, no GPU either", system.Info{Runtimes: rt("runc")}, nil, false, StatusWarn, []string{"nor does this host have a GPU"}},
		{"CDI only", system.Info{Runtimes: rt("runc"), DiscoveredDevices: cdi}, nil, true, StatusWarn, []string{"CDI devices (nvidia.com/gpu=0", "no nvidia runtime"}},
		{"no answer", system.Info{}, errors.New("permission denied"), true, StatusWarn, []string{"docker info: permission denied"}},
	} {
		c := runtimeCheck(tc.info, tc.err, tc.hasGPU)
		if c.Status != tc.want || c.Name != "nvidia runtime" {
			t.Errorf("%s: %+v, want %s", tc.name, c, tc.want)
		}
		for _, s := range tc.detailHas {
			if !strings.Contains(c.Detail, s) {
				t.Errorf("%s: detail %q lacks %q", tc.name, c.Detail, s)
			}
		}
		if c.Status == StatusWarn && tc.err == nil &&
			(!strings.Contains(c.Fix, "nvidia-ctk runtime configure --runtime=docker") || !strings.Contains(c.Fix, "nvidia-ctk cdi generate")) {
			t.Errorf("%s: fix %q does not say what to install", tc.name, c.Fix)
		}
	}
}

func TestDaemonChecks(t *testing.T) {
	peerOK := func(skew float64) PeerClock {
		return PeerClock{PeerID: "12D3KooWpeer" + fmt.Sprint(skew), SkewMS: skew, RTTMS: 1}
	}
	base := Result{Network: repo.NetworkTestnet, ListenAddrs: []string{"/ip4/0.0.0.0/tcp/4030"}, Reachability: "public", Peers: 2}
	for _, tc := range []struct {
		name      string
		clocks    []PeerClock
		peers     int
		want      string
		detailHas string
	}{
		{"in sync", []PeerClock{peerOK(3), peerOK(-12)}, 2, StatusPass, "median skew -4.5 ms over 2"},
		{"drifting", []PeerClock{peerOK(2500), peerOK(2600), peerOK(2400)}, 3, StatusWarn, "+2.5 s"},
		{"far off", []PeerClock{peerOK(-45000), peerOK(-44000)}, 2, StatusFail, "expired"},
		// One answer is no majority: however far off, it warns.
		{"one far-off answer", []PeerClock{peerOK(-45000)}, 1, StatusWarn, "only one peer answered"},
		// One peer of three far off is its clock, not ours.
		{"one liar of three", []PeerClock{peerOK(1), peerOK(-2), peerOK(3_600_000)}, 3, StatusPass, "outlier"},
		{"errors are not skew", []PeerClock{{PeerID: "p", Error: "protocol not supported"}, peerOK(1)}, 2, StatusPass, "over 1 peer"},
		{"nobody answers", []PeerClock{{PeerID: "p", Error: "protocol not supported"}}, 1, StatusWarn, "protocol not supported"},
		{"no peers", nil, 0, StatusSkip, "no connected peers"},
	} {
		r := base
		r.Clocks, r.Peers = tc.clocks, tc.peers
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
	r.Network = repo.NetworkLocal
	if c := byName(DaemonChecks(r), "listen"); c.Status != StatusPass {
		t.Errorf("loopback only on the local network: %+v", c)
	}
	for reach, want := range map[string]string{"public": StatusPass, "private": StatusWarn, "unknown": StatusWarn, "relayed": StatusWarn} {
		r.Reachability = reach
		if c := byName(DaemonChecks(r), "nat"); c.Status != want || (want != StatusPass && c.Fix == "") || !strings.HasPrefix(c.Detail, reach+": ") {
			t.Errorf("reachability %s: %+v", reach, c)
		}
	}
	// Behind a NAT: hole punching passes once a relay holds a slot (the
	// first contact goes through it); without one, it warns.
	r.Reachability, r.Addrs = "nat-holepunch", []string{"/ip4/11.77.0.10/udp/4001/quic-v1/p2p/12D3KooWrelay/p2p-circuit"}
	if c := byName(DaemonChecks(r), "nat"); c.Status != StatusPass || !strings.Contains(c.Detail, "a relay holds a slot") || c.Fix == "" {
		t.Errorf("hole-punchable with a relay: %+v", c)
	}
	r.Addrs = nil
	if c := byName(DaemonChecks(r), "nat"); c.Status != StatusWarn || !strings.Contains(c.Detail, "no relay holds a slot") {
		t.Errorf("hole-punchable without a relay: %+v", c)
	}
	for _, c := range DaemonSkipped("daemon not running") {
		if c.Status != StatusSkip || c.Detail != "skipped: daemon not running" {
			t.Errorf("DaemonSkipped: %+v", c)
		}
	}
}

// fakeClocks answers the clock survey with a skew per peer.
type fakeClocks map[peer.ID]time.Duration

func (f fakeClocks) Clock(_ context.Context, p peer.ID) (p2p.ClockSample, error) {
	s, ok := f[p]
	if !ok {
		return p2p.ClockSample{}, errors.New("protocol not supported")
	}
	return p2p.ClockSample{Peer: p, Skew: s, RTT: time.Millisecond}, nil
}

// doctorClock is what Doctor does with the peers: pick, survey, sum up,
// then judge.
func doctorClock(t *testing.T, f fakeClocks) (Result, Check) {
	t.Helper()
	var ps []p2p.PeerInfo
	for id := range f {
		ps = append(ps, p2p.PeerInfo{ID: id, Direction: "outbound"})
	}
	r := Result{Peers: len(ps)}
	SurveyClocks(context.Background(), f, &r, ps)
	return r, clockCheck(r)
}

func TestDoctorClockSurvey(t *testing.T) {
	honest := func(n int, skew time.Duration) fakeClocks {
		f := fakeClocks{}
		for i := range n {
			f[peer.ID(fmt.Sprintf("12D3KooWhonest-peer-%02d", i))] = skew + time.Duration(i)*time.Millisecond
		}
		return f
	}
	// Five honest peers and one that says it is an hour ahead: this
	// host's clock is fine, and the liar is named.
	f := honest(5, 0)
	liar := peer.ID("12D3KooWliar-of-the-hour")
	f[liar] = time.Hour
	r, c := doctorClock(t, f)
	if c.Status != StatusPass || !strings.Contains(c.Detail, "outlier") || !strings.Contains(c.Detail, p2p.ShortID(liar.String())) {
		t.Errorf("5 honest + 1 liar: %+v", c)
	}
	if r.MedianSkewMS > 5 || r.MaxSkewMS < 3_600_000 {
		t.Errorf("median %v ms, max %v ms", r.MedianSkewMS, r.MaxSkewMS)
	}
	for _, p := range r.Clocks {
		if strings.Contains(c.Detail, p2p.ShortID(p.PeerID)) != (p.PeerID == liar.String()) {
			t.Errorf("%s: named as outlier wrongly (liar %v): %q", p.PeerID, p.PeerID == liar.String(), c.Detail)
		}
	}
	// Every peer 40 s ahead: it is this host that is 40 s behind.
	if _, c := doctorClock(t, honest(6, 40*time.Second)); c.Status != StatusFail || strings.Contains(c.Detail, "outlier") {
		t.Errorf("all peers +40 s: %+v", c)
	}
	// A single answer, however far off, is only a warning.
	if _, c := doctorClock(t, honest(1, 40*time.Second)); c.Status != StatusWarn {
		t.Errorf("one peer +40 s: %+v", c)
	}
	// All three peers 3 s ahead: drifting.
	if r, c := doctorClock(t, honest(3, 3*time.Second)); c.Status != StatusWarn || len(r.Clocks) != 3 {
		t.Errorf("three peers +3 s: %+v", c)
	}
}

func TestDoctorPickClockPeers(t *testing.T) {
	var ps []p2p.PeerInfo
	for i := range 40 {
		d := "inbound"
		if i%8 == 0 {
			d = "outbound" // 5 of 40
		}
		ps = append(ps, p2p.PeerInfo{ID: peer.ID(fmt.Sprintf("peer-%02d-%s", i, d)), Direction: d})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	first := PickClockPeers(ps, MaxClockPeers, rng.Shuffle)
	if len(first) != MaxClockPeers {
		t.Fatalf("picked %d, want %d", len(first), MaxClockPeers)
	}
	for i, id := range first {
		if out := strings.HasSuffix(string(id), "outbound"); out != (i < 5) {
			t.Errorf("pick %d is %s: the 5 outbound peers must come first", i, id)
		}
	}
	// At random: not the first 16 in order, and not the same sample twice.
	same, ordered := true, true
	second := PickClockPeers(ps, MaxClockPeers, rng.Shuffle)
	for i := range first {
		same = same && first[i] == second[i]
	}
	inbound := first[5:]
	for i := 1; i < len(inbound); i++ {
		ordered = ordered && inbound[i-1] < inbound[i]
	}
	if same || ordered {
		t.Errorf("the sample is not random: same twice %v, in order %v", same, ordered)
	}
	if got := PickClockPeers(ps[:3], MaxClockPeers, rng.Shuffle); len(got) != 3 {
		t.Errorf("3 peers: picked %d", len(got))
	}
}

// The service firewall check: pass when the rules are there, warn with
// the exact commands and what is open when some are missing, skip with
// why when they cannot be checked (not root), and say so when the owner
// turned it off.
func TestServiceFirewallCheck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	if _, err := repo.InitRepo(dir, repo.DefaultConfig(repo.NetworkLocal)); err != nil {
		t.Fatal(err)
	}
	// Missing and unknown reports name their rules, as
	// executor.CheckServiceFirewall's do.
	fake := func(v4, v6 executor.FirewallState, detail string, rules ...executor.FirewallRule) func(context.Context) []executor.FirewallReport {
		return func(context.Context) []executor.FirewallReport {
			return []executor.FirewallReport{{Tool: "iptables", State: v4, Detail: detail, Rules: rules}, {Tool: "ip6tables", State: v6, Detail: detail}}
		}
	}
	ctx := context.Background()
	input, forward := executor.ServiceFirewallRules[0], executor.ServiceFirewallRules[1]
	add := "sudo iptables -I INPUT -i glsvc+ -m conntrack --ctstate NEW -j DROP"
	if c := ServiceFirewallCheck(ctx, dir, fake(executor.FirewallPresent, executor.FirewallPresent, "present")); c.Status != StatusPass || c.Fix != "" {
		t.Errorf("rule present: %+v", c)
	}
	if c := ServiceFirewallCheck(ctx, dir, fake(executor.FirewallPresent, executor.FirewallSkipped, "no ip6tables binary")); c.Status != StatusPass || !strings.Contains(c.Detail, "no ip6tables") {
		t.Errorf("no ip6tables: %+v", c)
	}
	c := ServiceFirewallCheck(ctx, dir, fake(executor.FirewallMissing, executor.FirewallPresent, "missing", input))
	if c.Status != StatusWarn || c.Fix != add || !strings.Contains(c.Detail, "listeners") || strings.Contains(c.Detail, "rearranges") {
		t.Errorf("INPUT rule missing: %+v", c)
	}
	c = ServiceFirewallCheck(ctx, dir, fake(executor.FirewallMissing, executor.FirewallPresent, "missing", forward))
	if c.Status != StatusWarn || c.Fix != "sudo iptables -t mangle -I FORWARD -o glsvc+ -j DROP" ||
		!strings.Contains(c.Detail, "other containers can reach service jobs") || strings.Contains(c.Detail, "listeners") {
		t.Errorf("FORWARD rule missing: %+v", c)
	}
	c = ServiceFirewallCheck(ctx, dir, fake(executor.FirewallUnknown, executor.FirewallUnknown, "iptables: permission denied", executor.ServiceFirewallRules...))
	if c.Status != StatusSkip || !strings.Contains(c.Detail, "permission denied") || !strings.Contains(c.Fix, add) ||
		!strings.Contains(c.Fix, "sudo iptables -C INPUT") {
		t.Errorf("not root: %+v", c)
	}
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.Provider.ServiceFirewall = "off"
	if err := os.WriteFile(filepath.Join(dir, repo.ConfigFile), []byte(cfg.Render()), 0o600); err != nil {
		t.Fatal(err)
	}
	c = ServiceFirewallCheck(ctx, dir, fake(executor.FirewallMissing, executor.FirewallMissing, "missing", input))
	if c.Status != StatusWarn || !strings.Contains(c.Detail, "service_firewall = off") {
		t.Errorf("rule missing, setting off: %+v", c)
	}
}
