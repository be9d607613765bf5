package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDaemonIDPeersConnectPingShutdown(t *testing.T) {
	repoA, repoB := initRepo(t), initRepo(t)
	a := startDaemon(t, repoA)
	b := startDaemon(t, repoB)

	if _, err := os.Stat(filepath.Join(repoA, "rpc.url")); err != nil {
		t.Fatalf("rpc.url missing while the daemon runs: %v", err)
	}
	r := gleaner(t, "--repo", repoA, "id", "--json")
	mustOK(t, r, "id")
	var info struct {
		PeerID  string   `json:"peer_id"`
		Network string   `json:"network"`
		Addrs   []string `json:"addrs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("id --json is not JSON: %v\n%s", err, r.stdout)
	}
	if info.PeerID != a.peerID || info.Network != "local" || len(info.Addrs) == 0 {
		t.Fatalf("id = %+v, want peer %s on local", info, a.peerID)
	}

	// A second daemon on the same repo is refused while the first runs.
	r = gleaner(t, "--repo", repoA, "daemon", "--rpc", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0")
	if r.code != 1 || !strings.Contains(r.stderr, "already running") {
		t.Fatalf("second daemon: exit %d, stderr %q", r.code, r.stderr)
	}

	mustOK(t, gleaner(t, "--repo", repoA, "connect", b.addrs[0]), "connect")
	r = gleaner(t, "--repo", repoA, "peers", "--json")
	mustOK(t, r, "peers")
	var peers []struct {
		PeerID string `json:"peer_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &peers); err != nil {
		t.Fatal(err)
	}
	if !containsPeer(peers, b.peerID) {
		t.Fatalf("peers after connect = %s, want %s", r.stdout, b.peerID)
	}
	r = gleaner(t, "--repo", repoA, "ping", "--count", "2", "--json", b.peerID)
	mustOK(t, r, "ping")
	var ping struct {
		RTTs []float64 `json:"rtts_ms"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ping); err != nil || len(ping.RTTs) != 2 || ping.RTTs[0] <= 0 {
		t.Fatalf("ping = %s (%v)", r.stdout, err)
	}
	r = gleaner(t, "--repo", repoA, "ping", "not-a-peer")
	if r.code != 2 {
		t.Fatalf("ping with a bad peer ID: exit %d, stderr %q", r.code, r.stderr)
	}
	r = gleaner(t, "--repo", repoA, "rpc", "rpc.discover")
	mustOK(t, r, "rpc rpc.discover")
	for _, m := range []string{"node_info", "node_peers", "node_connect", "node_ping", "node_peerEvents"} {
		if !strings.Contains(r.stdout, `"`+m+`"`) {
			t.Errorf("rpc.discover lacks %s", m)
		}
	}
	mustOK(t, gleaner(t, "--repo", repoA, "disconnect", b.peerID), "disconnect")

	code, took := a.stop(t, syscall.SIGINT)
	if code != 0 || took > 5*time.Second {
		t.Fatalf("SIGINT: exit %d after %v, want 0 within 5 s\nstderr: %s", code, took, a.stderr)
	}
	if _, err := os.Stat(filepath.Join(repoA, "rpc.url")); !os.IsNotExist(err) {
		t.Fatalf("rpc.url left behind after a clean exit: %v", err)
	}
	code, took = b.stop(t, syscall.SIGTERM)
	if code != 0 || took > 5*time.Second {
		t.Fatalf("SIGTERM: exit %d after %v", code, took)
	}
}

func containsPeer(ps []struct {
	PeerID string `json:"peer_id"`
}, id string) bool {
	for _, p := range ps {
		if p.PeerID == id {
			return true
		}
	}
	return false
}

func TestCrashedDaemonLeavesNoStuckLock(t *testing.T) {
	repo := initRepo(t)
	d := startDaemon(t, repo)
	if code, _ := d.stop(t, syscall.SIGKILL); code != -1 {
		t.Fatalf("SIGKILL: exit code %d", code)
	}
	// rpc.url is stale now; clients must say nobody answers, not hang.
	r := gleaner(t, "--repo", repo, "id")
	if r.code != 1 || !strings.Contains(r.stderr, "no daemon") {
		t.Fatalf("id after crash: exit %d, stderr %q", r.code, r.stderr)
	}
	d2 := startDaemon(t, repo)
	if d2.peerID != d.peerID {
		t.Fatalf("identity changed across restart: %s -> %s", d.peerID, d2.peerID)
	}
	mustOK(t, gleaner(t, "--repo", repo, "id"), "id after restart")
}

// A daemon whose bootstrap name cannot be resolved says so in `gleaner
// id` and `gleaner peers`, with when it tries again, instead of a bare
// "peers: 0".
func TestIDSaysWhyBootstrapFailed(t *testing.T) {
	repo := initRepo(t)
	startDaemon(t, repo, "--bootstrap", "/dnsaddr/bootstrap.nowhere.invalid")
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := gleaner(t, "--repo", repo, "id")
		mustOK(t, r, "id")
		if out = r.stdout; strings.Contains(out, "bootstrap:     not reached") {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !strings.Contains(out, "bootstrap:     not reached") || !strings.Contains(out, "did not resolve") || !strings.Contains(out, "next try in") {
		t.Fatalf("gleaner id does not say why there are no peers:\n%s", out)
	}
	r := gleaner(t, "--repo", repo, "peers")
	mustOK(t, r, "peers")
	if !strings.Contains(r.stdout, "no peers connected") || !strings.Contains(r.stdout, "bootstrap peers not reached") ||
		!strings.Contains(r.stdout, "did not resolve") {
		t.Fatalf("gleaner peers does not say why there are no peers:\n%s", r.stdout)
	}
}
