package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonsUnder lists live processes whose command line mentions dir.
func daemonsUnder(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var found []string
	for _, e := range ents {
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		s := strings.ReplaceAll(string(cl), "\x00", " ")
		if strings.Contains(s, dir) && strings.Contains(s, " daemon") {
			found = append(found, e.Name()+": "+s)
		}
	}
	return found
}

func TestTestnetUpMeshesAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	r := gleaner(t, "testnet", "up", "--nodes", "3", "--dir", dir, "--run-for", "1s", "--json")
	mustOK(t, r, "testnet up")
	var out struct {
		Nodes []struct {
			PeerID string `json:"peer_id"`
			RPCURL string `json:"rpc_url"`
		} `json:"nodes"`
		Peers []int `json:"peers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("testnet up --json: %v\n%s", err, r.stdout)
	}
	if len(out.Nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(out.Nodes))
	}
	for i, p := range out.Peers {
		if p != 2 {
			t.Errorf("node %d has %d peers, want 2 (full mesh)", i, p)
		}
	}
	if left := daemonsUnder(t, dir); len(left) > 0 {
		t.Fatalf("daemons still running after testnet up returned:\n%s", strings.Join(left, "\n"))
	}
}

func TestTestnetUpStopsEverythingOnCtrlC(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(binPath, "testnet", "up", "--nodes", "2", "--dir", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "try:") {
			break
		}
	}
	if n := len(daemonsUnder(t, dir)); n != 2 {
		t.Fatalf("%d daemons running, want 2\nstderr: %s", n, stderr.String())
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(&bytes.Buffer{}) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("testnet up after Ctrl-C: %v\nstderr: %s", err, stderr.String())
	}
	if left := daemonsUnder(t, dir); len(left) > 0 {
		t.Fatalf("daemons left running after Ctrl-C:\n%s", strings.Join(left, "\n"))
	}
}
