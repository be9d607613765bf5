package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node/rpc"
)

type doctorJSON struct {
	OK     bool `json:"ok"`
	Checks []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Detail string `json:"detail"`
		Fix    string `json:"fix"`
	} `json:"checks"`
}

func parseDoctor(t testing.TB, r result) (doctorJSON, map[string]string, map[string]string) {
	t.Helper()
	var d doctorJSON
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	status, detail := map[string]string{}, map[string]string{}
	for _, c := range d.Checks {
		status[c.Name], detail[c.Name] = c.Status, c.Detail
		if c.Status != "pass" && c.Status != "skip" && c.Fix == "" {
			t.Errorf("check %s is %s without a fix: %q", c.Name, c.Status, c.Detail)
		}
	}
	return d, status, detail
}

// checkLocalDoctor checks what this machine's real Docker and (absent) GPU
// must show.
func checkLocalDoctor(t *testing.T, status, detail map[string]string) {
	t.Helper()
	if status["repo"] != "pass" || status["disk"] == "" {
		t.Errorf("repo %s (%s), disk %s", status["repo"], detail["repo"], status["disk"])
	}
	if status["docker"] != "pass" && os.Getenv("GLEANER_SKIP_DOCKER") != "1" {
		t.Errorf("docker check %s: %s (this test needs the real engine; GLEANER_SKIP_DOCKER=1 excuses it)", status["docker"], detail["docker"])
	}
	switch _, err := exec.LookPath("iptables"); {
	case os.Geteuid() == 0 && err == nil:
		if s := status["service firewall"]; s != "pass" && s != "warn" {
			t.Errorf("service firewall as root with iptables: %s %q", s, detail["service firewall"])
		}
	default:
		if s := status["service firewall"]; s != "skip" && s != "pass" && s != "warn" {
			t.Errorf("service firewall without root or iptables: %s %q", s, detail["service firewall"])
		}
	}
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		// No GPU here: it must say so, never pass.
		if status["gpu"] != "warn" || !strings.Contains(detail["gpu"], "simulated") {
			t.Errorf("gpu check without a GPU: %s %q", status["gpu"], detail["gpu"])
		}
	}
	if status["gpu container"] == "pass" && status["nvidia runtime"] != "pass" {
		t.Errorf("gpu container passed without the nvidia runtime")
	}
	if status["nvidia runtime"] != "pass" && !strings.Contains(detail["gpu container"], "nvidia/cuda") {
		t.Errorf("gpu container skipped without naming the image: %q", detail["gpu container"])
	}
}

func TestDoctorWithoutDaemon(t *testing.T) {
	repo := initRepo(t)
	r := gleaner(t, "--repo", repo, "doctor", "--json")
	_, status, detail := parseDoctor(t, r)
	checkLocalDoctor(t, status, detail)
	for _, n := range []string{"listen", "nat", "clock"} {
		if status[n] != "skip" || detail[n] != "skipped: daemon not running (start it with gleaner daemon)" {
			t.Errorf("%s without a daemon: %s %q", n, status[n], detail[n])
		}
	}
	// A world-readable token fails the repo check: exit 1, the report on
	// stdout and one JSON error on stderr.
	if err := os.Chmod(filepath.Join(repo, "rpc.token"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = gleaner(t, "--repo", repo, "doctor", "--json")
	d, status, _ := parseDoctor(t, r)
	if r.code != 1 || d.OK || status["repo"] != "fail" {
		t.Errorf("world-readable token: exit %d, ok %v, repo %s", r.code, d.OK, status["repo"])
	}
	var e jsonError
	if json.Unmarshal([]byte(r.stderr), &e) != nil || !strings.Contains(e.Error.Message, "repo") {
		t.Errorf("stderr %q, want one JSON error naming the repo check", r.stderr)
	}
	r = gleaner(t, "--repo", repo, "doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  repo") || !strings.Contains(r.stdout, "chmod 600") {
		t.Errorf("text: exit %d\n%s", r.code, r.stdout)
	}
}

// TestDoctorExtraArgs: doctor takes no arguments, and says so as a usage
// error (one line, a hint, exit 2) rather than ignoring them.
func TestDoctorExtraArgs(t *testing.T) {
	repo := initRepo(t)
	r := gleaner(t, "--repo", repo, "doctor", "extra", "args")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 2 || r.stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "gleaner: ") ||
		!strings.Contains(lines[0], `"extra"`) || !strings.HasPrefix(lines[1], "hint: ") {
		t.Errorf("doctor extra args: exit %d, stdout %q, stderr %q; want exit 2, one line and a hint", r.code, r.stdout, r.stderr)
	}
}

// TestDoctorCallFix: only a daemon without node_doctor is told to restart
// on this version; other failures get a fix for what went wrong.
func TestDoctorCallFix(t *testing.T) {
	for _, tc := range []struct {
		err      error
		has, not string
	}{
		{rpc.Errorf(rpc.CodeMethodNotFound, "method node_doctor not found"), "restart it on this version", ""},
		{fmt.Errorf("call: %w", rpc.Errorf(rpc.CodeUnauthorized, "bad token")), "rpc.token", "this version"},
		{fmt.Errorf("rpc http://x: %w", context.DeadlineExceeded), "busy or stuck", "this version"},
		{rpc.Errorf(rpc.CodeInternal, "disk on fire"), "log", "this version"},
	} {
		fix := doctorCallFix(tc.err)
		if !strings.Contains(fix, tc.has) || (tc.not != "" && strings.Contains(fix, tc.not)) {
			t.Errorf("%v: fix %q, want %q and not %q", tc.err, fix, tc.has, tc.not)
		}
	}
}

// TestDoctorTokenRefused: a daemon that refuses the repo's token is a
// warning that points at the token, not at the daemon's version.
func TestDoctorTokenRefused(t *testing.T) {
	repo := initRepo(t)
	startDaemon(t, repo)
	if err := os.WriteFile(filepath.Join(repo, "rpc.token"), []byte(strings.Repeat("0", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := gleaner(t, "--repo", repo, "doctor", "--json")
	var d doctorJSON
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	for _, c := range d.Checks {
		if c.Name != "clock" && c.Name != "listen" && c.Name != "nat" {
			continue
		}
		if c.Status != "warn" || !strings.Contains(c.Fix, "rpc.token") || strings.Contains(c.Fix, "this version") {
			t.Errorf("%s with a refused token: %s %q, fix %q", c.Name, c.Status, c.Detail, c.Fix)
		}
	}
}

// TestDoctorRealDaemons runs doctor against two real daemons connected
// over libp2p: the clock check measures the other one.
func TestDoctorRealDaemons(t *testing.T) {
	repoA, repoB := initRepo(t), initRepo(t)
	startDaemon(t, repoA)
	b := startDaemon(t, repoB)
	mustOK(t, gleaner(t, "--repo", repoA, "connect", b.addrs[0]), "connect")

	r := gleaner(t, "--repo", repoA, "doctor", "--json")
	d, status, detail := parseDoctor(t, r)
	checkLocalDoctor(t, status, detail)
	if (r.code == 0) != d.OK {
		t.Errorf("exit %d but ok %v", r.code, d.OK)
	}
	if status["listen"] != "pass" || !strings.Contains(detail["listen"], "/ip4/127.0.0.1/tcp/") {
		t.Errorf("listen: %s %q", status["listen"], detail["listen"])
	}
	if status["nat"] == "" || status["nat"] == "skip" {
		t.Errorf("nat: %s %q", status["nat"], detail["nat"])
	}
	// One answer alone never fails the clock check; a daemon on this
	// machine shares its clock, so it passes.
	if status["clock"] != "pass" || !strings.Contains(detail["clock"], "over 1 peer") {
		t.Errorf("clock against a daemon on this machine: %s %q", status["clock"], detail["clock"])
	}

	// What the clock check read: B's own answer, over libp2p.
	r = gleaner(t, "--repo", repoA, "rpc", "node_doctor")
	mustOK(t, r, "rpc node_doctor")
	var res struct {
		Clocks []struct {
			PeerID string  `json:"peer_id"`
			SkewMS float64 `json:"skew_ms"`
			RTTMS  float64 `json:"rtt_ms"`
			Error  string  `json:"error"`
		} `json:"clocks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Clocks) != 1 {
		t.Fatalf("node_doctor: %v\n%s", err, r.stdout)
	}
	c := res.Clocks[0]
	if c.PeerID != b.peerID || c.Error != "" || c.RTTMS <= 0 || c.SkewMS > c.RTTMS/2+1 || c.SkewMS < -c.RTTMS/2-1 {
		t.Errorf("clock of B (same machine, same clock): %+v", c)
	}
	r = gleaner(t, "--repo", repoA, "rpc", "rpc.discover")
	if !strings.Contains(r.stdout, `"node_doctor"`) {
		t.Error("rpc.discover lacks node_doctor")
	}
}

// BenchmarkDoctor is one `gleaner doctor --json` against a daemon with one
// connected peer, as a user runs it; it should stay under 3 s.
func BenchmarkDoctor(b *testing.B) {
	repoA := filepath.Join(b.TempDir(), "a")
	repoB := filepath.Join(b.TempDir(), "b")
	for _, r := range []string{repoA, repoB} {
		if res := runTB(b, "--repo", r, "init", "--network", "local"); res.code != 0 {
			b.Fatalf("init: %s", res.stderr)
		}
	}
	startDaemon(b, repoA)
	d := startDaemon(b, repoB)
	if res := runTB(b, "--repo", repoA, "connect", d.addrs[0]); res.code != 0 {
		b.Fatalf("connect: %s", res.stderr)
	}
	b.ResetTimer()
	for range b.N {
		if res := runTB(b, "--repo", repoA, "doctor", "--json"); res.stdout == "" {
			b.Fatalf("doctor: exit %d: %s", res.code, res.stderr)
		}
	}
}

// runTB is gleaner for a benchmark.
func runTB(tb testing.TB, args ...string) result {
	tb.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "GLEANER_REPO=")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		tb.Fatalf("run %v: %v", args, err)
	}
	return result{so.String(), se.String(), cmd.ProcessState.ExitCode()}
}

// TestDoctorGPUCheckNoGPU is `make gpu-check` on a machine without an
// NVIDIA GPU (this one): the skip line, exit 0, and no other checks.
func TestDoctorGPUCheckNoGPU(t *testing.T) {
	r := gleaner(t, "doctor", "--gpu-check")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 1 ||
		!strings.HasPrefix(lines[0], "no NVIDIA GPU: skipped (") || r.stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and the skip line", r.code, r.stdout, r.stderr)
	}
	r = gleaner(t, "doctor", "--gpu-check", "--json")
	var rep struct {
		Skipped bool `json:"skipped"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || !rep.Skipped {
		t.Errorf("--json: exit %d, stdout %q", r.code, r.stdout)
	}
}
