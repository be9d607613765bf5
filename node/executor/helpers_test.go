package executor

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// probeImage is built FROM scratch by the tests themselves (no registry is
// reachable) from testdata/probe, a static Go binary.
// The tag is this process's own: TestMain removes the image at the end,
// which must not pull it from under another run of these tests on the
// same engine (a -race run beside a plain one).
var probeImage = fmt.Sprintf("gleaner-executor-probe:test-%d", os.Getpid())

var (
	probeOnce sync.Once
	probeBin  string // the static probe binary, shared by the image builds
	probeErr  error
	probeTmp  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if probeBin != "" { // leave the engine as we found it
		if d, err := NewDocker(context.Background()); err == nil {
			_, _ = d.cli.ImageRemove(context.Background(), probeImage, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	}
	if probeTmp != "" {
		os.RemoveAll(probeTmp)
	}
	os.Exit(code)
}

// needDocker fails the test unless Docker answers; only an explicit
// GLEANER_SKIP_DOCKER=1 turns that into a skip, so that a CI machine
// without Docker cannot pass these tests by accident.
func needDocker(t testing.TB) *Docker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := NewDocker(ctx)
	if err != nil {
		if os.Getenv("GLEANER_SKIP_DOCKER") == "1" {
			t.Skipf("skipped: this test requires Docker and GLEANER_SKIP_DOCKER=1 is set (%v)", err)
		}
		t.Fatalf("this test requires a reachable Docker engine; set GLEANER_SKIP_DOCKER=1 to skip it explicitly: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err := buildProbe(); err != nil {
		t.Fatalf("build probe binary: %v", err)
	}
	buildImage(t, d, probeImage, nil)
	return d
}

func buildProbe() error {
	probeOnce.Do(func() {
		probeTmp, probeErr = os.MkdirTemp("", "gleaner-probe-")
		if probeErr != nil {
			return
		}
		bin := filepath.Join(probeTmp, "probe")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("%v: %s", err, out)
			return
		}
		probeBin = bin
	})
	return probeErr
}

// buildImage builds tag FROM scratch with the probe as entrypoint, plus
// any extra files (to give an image layers of its own).
func buildImage(t testing.TB, d *Docker, tag string, extra map[string][]byte) {
	t.Helper()
	bin, err := os.ReadFile(probeBin)
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM scratch\nCOPY probe /probe\n"
	files := map[string][]byte{"probe": bin}
	for name, data := range extra {
		files[name] = data
		dockerfile += "COPY " + name + " /" + name + "\n"
	}
	files["Dockerfile"] = []byte(dockerfile + "ENTRYPOINT [\"/probe\"]\n")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0)})
		tw.Write(data)
	}
	tw.Close()
	resp, err := d.cli.ImageBuild(context.Background(), &buf, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("build image %s: %v", tag, err)
	}
	defer resp.Body.Close()
	checkStream(t, "build "+tag, resp.Body)
}

// checkStream drains a Docker JSON message stream and fails on an error in it.
func checkStream(t testing.TB, what string, r io.Reader) {
	t.Helper()
	dec := json.NewDecoder(r)
	for {
		var m struct{ Error string }
		if err := dec.Decode(&m); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if m.Error != "" {
			t.Fatalf("%s: %s", what, m.Error)
		}
	}
}

var jobSeq int

// testSpec is a valid spec for the probe with a job ID unique to the test run.
func testSpec(t testing.TB, args ...string) Spec {
	jobSeq++
	id := fmt.Sprintf("t%d-%d", os.Getpid(), jobSeq)
	return Spec{
		JobID: id, LeaseCID: "bafy-lease-" + id, Image: probeImage, Command: args,
		CPUs: 0.5, MemoryMiB: 64, Pids: 64,
	}
}

// containersOf lists containers (running or not) labelled with the job.
func containersOf(t testing.TB, d *Docker, jobID string) []container.Summary {
	t.Helper()
	list, err := d.cli.ContainerList(context.Background(), container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", LabelJob+"="+jobID)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// waitForLog blocks until the job's output contains want.
func waitForLog(t testing.TB, j Job, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub := j.Logs().Subscribe()
	defer sub.Close()
	var seen strings.Builder
	for !strings.Contains(seen.String(), want) {
		chunk, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %q in logs (have %q): %v", want, seen.String(), err)
		}
		seen.Write(chunk)
	}
}

// cleanupJob removes the job even if the test fails halfway.
func cleanupJob(t testing.TB, j Job) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := j.Remove(ctx); err != nil {
			t.Errorf("remove %s: %v", j.ID(), err)
		}
	})
}
