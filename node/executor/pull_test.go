package executor

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
)

// startRegistry runs Debian's docker-registry on loopback (the engine
// treats 127.0.0.0/8 as an insecure registry, so no TLS is needed). The
// test fails without it unless GLEANER_SKIP_REGISTRY=1; install it with
// `apt-get install docker-registry`.
func startRegistry(t *testing.T) string {
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		if os.Getenv("GLEANER_SKIP_REGISTRY") == "1" {
			t.Skip("skipped: needs docker-registry (apt-get install docker-registry) and GLEANER_SKIP_REGISTRY=1 is set")
		}
		t.Fatal("this test needs Debian's docker-registry on PATH (apt-get install docker-registry); set GLEANER_SKIP_REGISTRY=1 to skip it explicitly")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)), 0o600)
	cmd := exec.Command(bin, "serve", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatal("docker-registry did not come up")
		}
	}
}

func TestDockerPullsAbsentImage(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	addr := startRegistry(t)

	// An image with an 8 MiB layer of its own, so the pull downloads
	// something even though the probe's layer is already local.
	pad := make([]byte, 8<<20)
	rand.Read(pad)
	ref := fmt.Sprintf("%s/gleaner/pulltest:%d", addr, time.Now().UnixNano())
	buildImage(t, d, ref, map[string][]byte{"pad": pad})
	push, err := d.cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: "e30="}) // "{}": no credentials
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, "push", push)
	push.Close()
	if _, err := d.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}) })

	spec := testSpec(t, "hello")
	spec.Image = ref
	var events, withBytes int
	j, err := d.Start(ctx, spec, Hooks{OnPull: func(p PullProgress) {
		events++
		if p.Total > 0 {
			withBytes++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	res, err := j.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	t.Logf("pulled %s in %v (%d progress events, %d with byte counts)", ref, res.PullDuration, events, withBytes)
	if !res.Pulled || res.PullDuration <= 0 || withBytes == 0 {
		t.Fatalf("pull not reported: %+v, %d events", res, events)
	}
	if string(j.Logs().Bytes()) != "hello from gleaner\n" {
		t.Fatalf("logs %q", j.Logs().Bytes())
	}
}
