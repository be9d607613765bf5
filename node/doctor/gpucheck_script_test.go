package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runGPUCheckScript runs scripts/gpu-check.sh (make gpu-check) from the
// repository root with PATH first searching pathDir, if set.
func runGPUCheckScript(t *testing.T, pathDir string, env ...string) (string, error) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "scripts/gpu-check.sh")
	cmd.Dir = root
	path := os.Getenv("PATH")
	if pathDir != "" {
		path = pathDir + string(os.PathListSeparator) + path
	}
	cmd.Env = append(os.Environ(), append([]string{"PATH=" + path, "CGO_CFLAGS=-w",
		"BIN=" + filepath.Join(t.TempDir(), "gleaner")}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// On a host without a GPU, which is what CI has, make gpu-check builds
// gleaner and the CUDA probe, prints the skip line and exits 0.
func TestGPUCheckScriptWithoutAGPU(t *testing.T) {
	if err := exec.Command("nvidia-smi", "-L").Run(); err == nil {
		t.Skip("this host has a GPU: run make gpu-check itself")
	}
	out, err := runGPUCheckScript(t, "")
	if err != nil {
		t.Fatalf("gpu-check without a GPU failed: %v\n%s", err, out)
	}
	for _, want := range []string{"gpu-check: building", "the CUDA probe", NoGPUSkipped} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// The GPU path's packaging, on this GPU-less host: with an nvidia-smi
// that lists a GPU on PATH, the script builds the probe's image FROM
// scratch with the glibc files ldd names, and the probe runs in it (it
// fails at dlopen, as there is no driver here, and says so); doctor
// then finds no NVML and skips.
func TestGPUCheckScriptPackagesTheProbe(t *testing.T) {
	if err := exec.Command("docker", "version").Run(); err != nil {
		t.Skipf("no Docker engine: %v", err)
	}
	if err := exec.Command("nvidia-smi", "-L").Run(); err == nil {
		t.Skip("this host has a GPU: run make gpu-check itself")
	}
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "nvidia-smi"), []byte("#!/bin/sh\necho 'GPU 0: Fake (UUID: GPU-0)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := "gleaner-cudaprobe:test-" + filepath.Base(t.TempDir())
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", img).Run() })
	out, err := runGPUCheckScript(t, fake, "PROBE_IMAGE="+img)
	if err != nil {
		t.Fatalf("gpu-check with a fake nvidia-smi failed: %v\n%s", err, out)
	}
	for _, want := range []string{"packaging the probe as " + img, "running gleaner doctor --gpu-check", NoGPUSkipped} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	run, err := exec.Command("docker", "run", "--rm", "--network", "none", img, "-hold", "1s").CombinedOutput()
	if err == nil || !strings.Contains(string(run), "cudaprobe: dlopen libcuda.so.1 failed") {
		t.Fatalf("the probe in its image without a driver: %v: %s (want it to run and fail at dlopen)", err, run)
	}
}
