package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
)

// The probe's line is read back exactly, and a job whose CUDA sees more
// than its leased GPU, or another one, fails.
func TestProbeLineAndJudgement(t *testing.T) {
	const u = "GPU-11111111-0000-0000-0000-000000000000"
	r, ok := parseProbe("noise\ncudaprobe: context on " + u + ", 1 device(s) visible, pid 7\n")
	if !ok || r != (probeReport{UUID: u, Devices: 1, PID: 7}) {
		t.Fatalf("parseProbe: %+v %v", r, ok)
	}
	if _, ok := parseProbe("cudaprobe: cuInit failed (CUresult 100)"); ok {
		t.Fatal("a failure line was read as a context")
	}
	for _, c := range []struct {
		r      probeReport
		status string
		detail string
	}{
		{probeReport{UUID: u, Devices: 1}, StatusPass, "1234 ms after its start"},
		{probeReport{UUID: u, Devices: 2}, StatusFail, "CUDA in the job sees 2"},
		{probeReport{UUID: "GPU-2", Devices: 1}, StatusFail, "opened its context on GPU-2"},
	} {
		got := judgeProbe(Check{Name: "job on the GPU"}, u, c.r, 1234*time.Millisecond)
		if got.Status != c.status || !strings.Contains(got.Detail, c.detail) || (got.Status == StatusFail && got.Fix == "") {
			t.Errorf("%+v: %+v, want %s with %q", c.r, got, c.status, c.detail)
		}
	}
}

// The job's process check passes only when the monitor keeps the GPU
// offered for a process its own-jobs callback names, and fails for one
// it does not name, or when the driver lists none.
func TestJobProcessCheck(t *testing.T) {
	g := attest.GPU{Index: 0, UUID: "GPU-1", Processes: []attest.Process{{PID: 42}}}
	src := attest.NewFake(attest.Inventory{Source: "nvml", GPUs: []attest.GPU{g}})
	jobs := func(context.Context) attest.JobProcesses {
		return attest.JobProcesses{42: {Job: "gpucheck-x", GPUs: []string{"GPU-1"}}}
	}
	ctx := context.Background()
	if c := jobProcessCheck(ctx, attest.NewMonitor(src, nil, jobs, 0), g); c.Status != StatusPass || !strings.Contains(c.Detail, "[42]") {
		t.Fatalf("the job's process: %+v", c)
	}
	if c := jobProcessCheck(ctx, attest.NewMonitor(src, nil, nil, 0), g); c.Status != StatusFail || !strings.Contains(c.Detail, "withdrew its GPU") {
		t.Fatalf("a process the executor does not name: %+v", c)
	}
	src.Set(attest.Inventory{Source: "nvml", GPUs: []attest.GPU{{Index: 0, UUID: "GPU-1"}}})
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // no process ever: do not wait listWait
	defer cancel()
	if c := jobProcessCheck(ctx, attest.NewMonitor(src, nil, jobs, 0), g); c.Status != StatusFail || !strings.Contains(c.Detail, "lists no compute process") {
		t.Fatalf("no process listed: %+v", c)
	}
}

// Without the probe (a GPU host where make gpu-check was not used, or a
// leased container check that did not pass) the job checks skip, and the
// timings of what ran are reported.
func TestGPUCheckJobPartSkipsWithoutAProbe(t *testing.T) {
	const img = "cuda:test"
	d := &fakeDocker{rts: []string{"nvidia"}, images: map[string]bool{img: true},
		gpuOut: "GPU 0: NVIDIA H100 (UUID: GPU-11111111-0000-0000-0000-000000000000)\n"}
	r := GPUCheck(context.Background(), GPUCheckOptions{Image: img, Docker: d,
		Source: func() (attest.Source, error) { return twoH100s(), nil }})
	if c := byName(r.Checks, "job on the GPU"); c.Status != StatusSkip || !strings.Contains(c.Detail, "no CUDA probe image") {
		t.Fatalf("job check without a probe image: %+v", c)
	}
	if _, ok := r.Timings["nvml_inventory_ms"]; !ok {
		t.Errorf("timings %v: no inventory time", r.Timings)
	}
	if _, ok := r.Timings["sign_verify_ms"]; !ok {
		t.Errorf("timings %v: no sign+verify time", r.Timings)
	}
	d.gpuOut = ""
	r = GPUCheck(context.Background(), GPUCheckOptions{Image: img, Docker: d, ProbeImage: "probe:local",
		Source: func() (attest.Source, error) { return twoH100s(), nil }})
	if c := byName(r.Checks, "job on the GPU"); c.Status != StatusSkip || !strings.Contains(c.Detail, "leased container check did not pass") {
		t.Fatalf("job check after a failed container check: %+v", c)
	}
}
