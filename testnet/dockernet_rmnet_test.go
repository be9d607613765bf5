package testnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRemoveNetworkTakesOffWhatItStillLists: a network that still has a
// running container on it (as the engine can still list one for a moment
// after `docker rm -f`) is removed all the same, and the container is taken
// off it. Without the force-disconnect, `docker network rm` refuses with
// "has active endpoints" every time, and removeNetwork fails.
func TestRemoveNetworkTakesOffWhatItStillLists(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "grm-" + hex.EncodeToString(b)
	if _, err := docker(ctx, "network", "create", "--internal", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = docker(context.Background(), "rm", "-f", name)
		_, _ = docker(context.Background(), "network", "rm", name)
	})
	if _, err := docker(ctx, "run", "-d", "--name", name, "--network", name, DemoImage, "-sleep", "5m", "-lines", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := docker(ctx, "network", "rm", name); err == nil || !strings.Contains(err.Error(), "active endpoints") {
		t.Fatalf("plain network rm with a running container on it: %v, want active endpoints (the case under test)", err)
	}
	if err := removeNetwork(ctx, name); err != nil {
		t.Fatalf("removeNetwork: %v", err)
	}
	if out, err := exec.Command("docker", "network", "inspect", name).CombinedOutput(); err == nil {
		t.Fatalf("network %s is still there after removeNetwork: %s", name, out)
	}
	out, err := docker(ctx, "inspect", "-f", "{{.State.Running}} {{len .NetworkSettings.Networks}}", name)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "true 0" {
		t.Fatalf("container after its network was removed: running, networks = %q, want \"true 0\"", got)
	}
	// A network already gone is not an error: Close may race a test's own
	// clean-up.
	if err := removeNetwork(ctx, name); err != nil {
		t.Fatalf("removeNetwork on a network already gone: %v", err)
	}
}
