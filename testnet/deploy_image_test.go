package testnet

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// The deploy/ artifacts, tested for real where this machine allows: the
// image is built from deploy/Dockerfile and started; the systemd unit goes
// through systemd-analyze; the compose files through docker-compose; the
// DaemonSet, for which no offline validator is packaged, is parsed and
// held to the NVIDIA device plugin's conventions.

const deployDir = "../deploy"

// nodeImage is deploy/Dockerfile built with this checkout's gleaner.
type nodeImage struct {
	Tag  string
	Size int64
	User string
}

// buildNodeImage builds deploy/Dockerfile, unchanged, without pulling: the
// build stage's work (go build, then deploy/rootfs.sh) is done here on the
// host, packed as a local image, and handed in as ROOTFS. BuildKit builds
// only the stages the target needs, so golang:* is never fetched.
func buildNodeImage(t testing.TB) nodeImage {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("the node image test needs a running Docker engine (it builds and starts the image): %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })

	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	// The Dockerfile's own build command, flag for flag.
	gobuild := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(root, "usr/local/bin/gleaner"), "./cmd/gleaner")
	gobuild.Dir = ".."
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=1", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gleaner with cgo (needs gcc): %v: %s", err, lastLines(out, 20))
	}
	if out, err := exec.CommandContext(ctx, "sh", filepath.Join(deployDir, "rootfs.sh"), root).CombinedOutput(); err != nil {
		t.Fatalf("deploy/rootfs.sh: %v: %s", err, out)
	}
	suffix := randHex()
	rootTag, tag := "gleaner-node-rootfs-test:"+suffix, "gleaner-node-test:"+suffix
	rootCtx, err := tarDir(root, "root", map[string]string{"Dockerfile": "FROM scratch\nCOPY root/ /\n"})
	if err != nil {
		t.Fatal(err)
	}
	removeImage := func(ref string) {
		_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	}
	t.Cleanup(func() { removeImage(rootTag) })
	if err := imageBuild(ctx, cli, rootCtx, "Dockerfile", rootTag, nil); err != nil {
		t.Fatalf("build the rootfs image: %v", err)
	}
	df, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// The final stage copies nothing from the context, so the Dockerfile
	// alone is the whole context.
	ctxTar, err := tarDir("", "", map[string]string{"deploy/Dockerfile": string(df)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(tag) })
	if err := imageBuild(ctx, cli, ctxTar, "deploy/Dockerfile", tag, map[string]string{"ROOTFS": rootTag}); err != nil {
		t.Fatalf("build deploy/Dockerfile with ROOTFS=%s: %v", rootTag, err)
	}
	ins, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("inspect %s: %v", tag, err)
	}
	return nodeImage{Tag: tag, Size: ins.Size, User: ins.Config.User}
}

// imageBuild runs one BuildKit build from a tar context and returns the
// first error the stream reports.
func imageBuild(ctx context.Context, cli *client.Client, tarCtx io.Reader, dockerfile, tag string, args map[string]string) error {
	opts := build.ImageBuildOptions{Version: build.BuilderBuildKit, Dockerfile: dockerfile, Tags: []string{tag}, Remove: true, BuildArgs: map[string]*string{}}
	for k, v := range args {
		opts.BuildArgs[k] = &v
	}
	resp, err := cli.ImageBuild(ctx, tarCtx, opts)
	if err != nil {
		return fmt.Errorf("%v (BuildKit needs Docker 18.09 or later)", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	built := false
	for {
		var m struct {
			ID    string `json:"id"`
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("reading the build's output: %w", err)
		}
		if m.Error != "" {
			return fmt.Errorf("%s", m.Error)
		}
		built = built || m.ID == "moby.image.id"
	}
	if !built {
		return fmt.Errorf("the engine reported no image ID for %s", tag)
	}
	return nil
}

// tarDir packs the tree at dir under prefix, then extra files by name.
func tarDir(dir, prefix string, extra map[string]string) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if dir != "" {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			hdr, err := tar.FileInfoHeader(info, "")
			if err != nil {
				return err
			}
			hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = filepath.ToSlash(filepath.Join(prefix, rel)), 0, 0, "", ""
			if d.IsDir() {
				hdr.Name += "/"
			}
			if err := tw.WriteHeader(hdr); err != nil || !info.Mode().IsRegular() {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	for name, body := range extra {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return nil, err
		}
	}
	return &buf, tw.Close()
}

// startNode runs the image as its docs say (the Docker socket mounted, the
// socket's group added by number) on the local network, and returns the
// container's name and how long it took to say ready.
func startNode(t testing.TB, img nodeImage) (string, time.Duration) {
	t.Helper()
	out, err := exec.Command("stat", "-c", "%g", "/var/run/docker.sock").Output()
	if err != nil {
		t.Fatalf("stat /var/run/docker.sock (the engine's socket must be there to mount it): %v", err)
	}
	gid := strings.TrimSpace(string(out))
	name := "gleaner-node-test-" + randHex()
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", "-v", name).Run() })
	t0 := time.Now()
	if out, err := exec.Command("docker", "run", "-d", "--name", name,
		"-v", "/var/run/docker.sock:/var/run/docker.sock", "--group-add", gid,
		img.Tag, "--network", "local").CombinedOutput(); err != nil {
		t.Fatalf("docker run %s: %v: %s", img.Tag, err, out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
		if bytes.Contains(logs, []byte("gleaner daemon ready")) {
			return name, time.Since(t0)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node in %s did not say ready within 60 s; its log:\n%s", name, lastLines(logs, 30))
		}
	}
}

// TestNodeImageRunsAsNonRootAndStopsCleanly builds the node image from
// deploy/Dockerfile and starts it: gleaner must run as uid 65532, come up
// on a fresh volume (--init), see the Docker engine through the socket,
// be a cgo build that can load NVML, answer `gleaner id` through exec, and
// stop cleanly on SIGTERM well inside the stop timeout.
func TestNodeImageRunsAsNonRootAndStopsCleanly(t *testing.T) {
	img := buildNodeImage(t)
	t.Logf("image %s: %.1f MB, user %q", img.Tag, float64(img.Size)/1e6, img.User)
	if img.User != "65532:65532" {
		t.Fatalf("the image's USER is %q, want 65532:65532 (numeric, non-root)", img.User)
	}
	name, ready := startNode(t, img)
	t.Logf("docker run to \"gleaner daemon ready\": %v", ready.Round(time.Millisecond))

	top, err := exec.Command("docker", "top", name, "-o", "pid,uid,args").CombinedOutput()
	if err != nil {
		t.Fatalf("docker top: %v: %s", err, top)
	}
	if !strings.Contains(string(top), "65532") || !strings.Contains(string(top), "gleaner daemon --init") {
		t.Fatalf("want `gleaner daemon --init` running as uid 65532; docker top says:\n%s", top)
	}
	if out, err := exec.Command("docker", "exec", name, "gleaner", "id").CombinedOutput(); err != nil || !strings.Contains(string(out), "12D3KooW") {
		t.Fatalf("`gleaner id` inside the container: %v: %s", err, out)
	}
	// doctor exits 1 on a failed check; the JSON says which.
	out, _ := exec.Command("docker", "exec", name, "gleaner", "doctor", "--json").Output()
	var rep struct {
		Checks []struct{ Name, Status, Detail string } `json:"checks"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("`gleaner doctor --json` inside the container: %v: %s", err, out)
	}
	got := map[string]string{}
	for _, c := range rep.Checks {
		got[c.Name] = c.Status + ": " + c.Detail
	}
	for _, want := range []string{"repo", "docker"} {
		if !strings.HasPrefix(got[want], "pass") {
			t.Errorf("doctor's %s check inside the image: %q, want pass", want, got[want])
		}
	}
	if g := got["gpu"]; g == "" || strings.Contains(g, "without cgo") {
		t.Errorf("doctor's gpu check: %q; the image's gleaner must be a cgo build that tries NVML", g)
	}

	t0 := time.Now()
	if out, err := exec.Command("docker", "stop", "-t", "15", name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	stop := time.Since(t0)
	code, _ := exec.Command("docker", "inspect", "-f", "{{.State.ExitCode}}", name).Output()
	logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
	t.Logf("SIGTERM to exit: %v", stop.Round(time.Millisecond))
	if strings.TrimSpace(string(code)) != "0" || !bytes.Contains(logs, []byte("stopped cleanly")) || stop > 10*time.Second {
		t.Fatalf("want exit 0 and \"stopped cleanly\" within 10 s of SIGTERM; got exit %s after %v; log:\n%s", bytes.TrimSpace(code), stop, lastLines(logs, 20))
	}
}

// BenchmarkNodeImageStart: docker run of the node image to "gleaner daemon
// ready" on a fresh anonymous volume (so --init makes a repo each time).
func BenchmarkNodeImageStart(b *testing.B) {
	img := buildNodeImage(b)
	b.ResetTimer() // also drops reported metrics, so they are reported last
	var total time.Duration
	for i := 0; i < b.N; i++ {
		name, ready := startNode(b, img)
		total += ready
		b.StopTimer()
		_ = exec.Command("docker", "rm", "-f", "-v", name).Run()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-ready")
	b.ReportMetric(float64(img.Size)/1e6, "image-MB")
}

func randHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
