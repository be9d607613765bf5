package testnet

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
)

// requireNetns fails loudly, never skips, when the test cannot build its
// LAN: a silent skip would let the mDNS path go untested for good.
//
// GLEANER_SKIP_NETNS=1 turns that into a skip that says what it skipped,
// for a developer's machine without root (as GLEANER_SKIP_DOCKER does for
// Docker); CI runs as root and never sets it.
func requireNetns(t testing.TB) {
	t.Helper()
	if os.Getenv("GLEANER_SKIP_NETNS") == "1" && (os.Geteuid() != 0 || !haveIP()) {
		t.Skipf("skipped: this test builds a LAN of network namespaces (root and iproute2) and GLEANER_SKIP_NETNS=1 is set")
	}
	if os.Geteuid() != 0 {
		t.Fatalf("this needs root: it builds a LAN of network namespaces (ip netns add, veth pairs, a bridge); run it as root, as the CI container does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("this needs iproute2's ip command (apt-get install iproute2): %v", err)
	}
}

func ipRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newNetns creates a namespace with a name unique to this run, with lo up,
// and deletes it when the test ends (which also destroys its veths).
func newNetns(t testing.TB, prefix, suffix string) string {
	t.Helper()
	ns := prefix + "-" + suffix
	ipRun(t, "netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	ipRun(t, "-n", ns, "link", "set", "lo", "up")
	return ns
}

// newLAN builds a switched Ethernet segment: a bridge in a hub namespace
// and n namespaces, each with an eth0 (MULTICAST, as veths are) on the
// bridge and the address 10.77.0.<i+1>/24. Nothing joins the host's own
// namespace, so only the multicast on this segment can introduce nodes.
func newLAN(t testing.TB, n int) (prefix string, spaces []string) {
	t.Helper()
	var r [3]byte
	_, _ = rand.Read(r[:])
	prefix = "gmdns" + hex.EncodeToString(r[:])
	hub := newNetns(t, prefix, "hub")
	ipRun(t, "-n", hub, "link", "add", "br0", "type", "bridge")
	ipRun(t, "-n", hub, "link", "set", "br0", "up")
	for i := range n {
		ns := newNetns(t, prefix, fmt.Sprint(i))
		port := fmt.Sprintf("p%d", i)
		ipRun(t, "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", hub)
		ipRun(t, "-n", hub, "link", "set", port, "master", "br0")
		ipRun(t, "-n", hub, "link", "set", port, "up")
		ipRun(t, "-n", ns, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i+1), "dev", "eth0")
		ipRun(t, "-n", ns, "link", "set", "eth0", "up")
		spaces = append(spaces, ns)
	}
	return prefix, spaces
}

// gleanerBinary builds ./cmd/gleaner into the test's temporary directory
// (after the first build, the Go build cache makes this a link step).
func gleanerBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gleaner")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gleaner")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gleaner: %v: %s", err, out)
	}
	return bin
}

// nsDaemon is a real `gleaner daemon` on a repo made by `gleaner init
// --network local`, run inside a namespace on all its interfaces with the
// config's defaults (mDNS on, no bootstrap list).
type nsDaemon struct {
	ns, repo, log, bin string
	peerID             string
}

func startNSDaemon(t testing.TB, bin, ns, dir string) *nsDaemon {
	t.Helper()
	d := &nsDaemon{ns: ns, bin: bin, repo: filepath.Join(dir, ns)}
	d.log = filepath.Join(d.repo, "daemon.log")
	if out, err := exec.Command(bin, "--repo", d.repo, "init", "--network", "local").CombinedOutput(); err != nil {
		t.Fatalf("gleaner init: %v: %s", err, out)
	}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", ns, bin, "--repo", d.repo, "daemon", "--json",
		"--listen", "/ip4/0.0.0.0/tcp/0", "--listen", "/ip4/0.0.0.0/udp/0/quic-v1", "--rpc", "127.0.0.1:0")
	cmd.Stderr = logf
	// As in procs.go: the daemons die with the test, even on SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(7 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	d.peerID = awaitDaemonReady(t, stdout, fmt.Sprintf("daemon in %s", ns), d.logText)
	return d
}

// peers is who the daemon is connected to, asked through the real CLI
// inside its namespace (its RPC listens on that namespace's loopback).
func (d *nsDaemon) peers() (map[string]bool, error) {
	out, err := exec.Command("ip", "netns", "exec", d.ns, d.bin, "--repo", d.repo, "peers", "--json").Output()
	if err != nil {
		return nil, fmt.Errorf("gleaner peers in %s: %v", d.ns, err)
	}
	var ps []node.PeerResult
	if err := json.Unmarshal(out, &ps); err != nil {
		return nil, fmt.Errorf("gleaner peers in %s: %v: %s", d.ns, err, out)
	}
	got := map[string]bool{}
	for _, p := range ps {
		got[p.PeerID] = true
	}
	return got, nil
}

func (d *nsDaemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

func haveIP() bool { _, err := exec.LookPath("ip"); return err == nil }
