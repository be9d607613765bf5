package doctor

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/node/executor"
)

// The GPU check's job part (issue 32): a job that opens a CUDA context,
// started by the node's Docker executor as it starts a leased job (the
// leased GPU by UUID, the executor's labels and limits), with the GPU
// monitor's rule read from the real driver: the job's process keeps its
// GPU offered, a process of no job (the same probe on the host) withdraws
// it, and CUDA inside the container sees the leased GPU alone. The probe
// is node/doctor/cudaprobe, which `make gpu-check` (scripts/gpu-check.sh)
// builds and packages as a local image; without it these checks skip.
//
// This path has been reviewed by reading only: no GPU was at hand where it
// was written, and its tests cover the probe's output and the skips.

const (
	// probeHold is how long the probe holds its context: enough for the
	// checks below, short enough that a check that fails leaves nothing
	// running for long.
	probeHold = 60 * time.Second
	// probeWait bounds the wait for the probe's context, and for the
	// driver to list a process.
	probeWait = 60 * time.Second
	listWait  = 15 * time.Second
)

// probeLine is what cudaprobe prints once its context exists.
var probeLine = regexp.MustCompile(`cudaprobe: context on (\S+), (\d+) device\(s\) visible, pid (\d+)`)

// probeReport is what the probe's line says.
type probeReport struct {
	UUID    string // of the device the context is on
	Devices int    // the devices CUDA sees
	PID     int    // the probe's PID as it sees it (the container's namespace)
}

func parseProbe(out string) (probeReport, bool) {
	m := probeLine.FindStringSubmatch(out)
	if m == nil {
		return probeReport{}, false
	}
	n, _ := strconv.Atoi(m[2])
	pid, _ := strconv.Atoi(m[3])
	return probeReport{UUID: m[1], Devices: n, PID: pid}, true
}

// judgeProbe passes when CUDA in the job saw uuid and no other GPU.
func judgeProbe(c Check, uuid string, r probeReport, firstCall time.Duration) Check {
	c.Status = StatusFail
	c.Fix = "check the NVIDIA Container Toolkit: a container given one GPU by UUID must see that GPU alone"
	switch {
	case r.Devices != 1:
		c.Detail = fmt.Sprintf("leased 1 GPU, CUDA in the job sees %d", r.Devices)
	case r.UUID != uuid:
		c.Detail = "leased " + uuid + ", CUDA in the job opened its context on " + r.UUID
	default:
		c.Status, c.Fix = StatusPass, ""
		c.Detail = fmt.Sprintf("a job on %s opened a CUDA context %d ms after its start was asked for (lease to first CUDA call); CUDA sees that GPU alone",
			uuid, firstCall.Milliseconds())
	}
	return c
}

// jobChecks runs the job checks on g; timings gets the lease-to-first-
// CUDA-call time.
func jobChecks(ctx context.Context, o GPUCheckOptions, src attest.Source, g attest.GPU, timings map[string]float64) []Check {
	c := Check{Name: "job on the GPU", Status: StatusSkip}
	if o.ProbeImage == "" {
		c.Detail = "skipped: no CUDA probe image (scripts/gpu-check.sh, run by make gpu-check, builds one)"
		return []Check{c}
	}
	d, err := executor.NewDocker(ctx)
	if err != nil {
		c.Detail = "skipped: " + err.Error()
		return []Check{c}
	}
	defer d.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := "gpucheck-" + hex.EncodeToString(b)
	d.SetOwner(executor.Owner{Node: "gpu-check", Instance: id})
	spec := executor.Spec{JobID: id, LeaseCID: id, Image: o.ProbeImage, Command: []string{"-hold", probeHold.String()},
		GPUUUIDs: []string{g.UUID}, CPUs: 1, MemoryMiB: 1024, Pids: 64}
	began := time.Now()
	job, err := d.Start(ctx, spec, executor.Hooks{})
	if err != nil {
		c.Status, c.Detail = StatusFail, "the job on "+g.UUID+" did not start: "+err.Error()
		c.Fix = "check the NVIDIA Container Toolkit (doctor's nvidia runtime check) and that " + o.ProbeImage + " is local"
		return []Check{c}
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = job.Stop(rctx, 0)
		_ = job.Remove(rctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var rep probeReport
	found := waitUntil(wctx, 10*time.Millisecond, func() bool {
		var ok bool
		rep, ok = parseProbe(string(job.Logs().Bytes()))
		return ok
	})
	firstCall := time.Since(began) // to within the 10 ms of the polling
	if !found {
		c.Status, c.Detail = StatusFail, "the job's CUDA probe opened no context: "+strings.TrimSpace(string(job.Logs().Bytes()))
		c.Fix = "run the probe by hand: docker run --rm --gpus '\"device=" + g.UUID + "\"' " + o.ProbeImage + " -hold 1s"
		return []Check{c}
	}
	timings["lease_to_first_cuda_call_ms"] = float64(firstCall.Microseconds()) / 1000
	c = judgeProbe(c, g.UUID, rep, firstCall)

	// The monitor, as the node runs it: its own jobs read from the
	// executor's containers, the processes from the driver.
	pids := d.JobPIDs()
	own := func(ctx context.Context) attest.JobProcesses {
		m, _ := pids.Read(ctx)
		out := attest.JobProcesses{}
		for pid, jp := range m {
			out[pid] = attest.JobProcess{Job: jp.JobID, GPUs: jp.GPUUUIDs}
		}
		return out
	}
	mon := attest.NewMonitor(src, nil, own, 0)
	return []Check{c, jobProcessCheck(ctx, mon, g), ownerProcessCheck(ctx, o, mon, g)}
}

// jobProcessCheck passes when the driver lists a process on g and the
// monitor does not withdraw g for it: it is the job's.
func jobProcessCheck(ctx context.Context, mon *attest.Monitor, g attest.GPU) Check {
	c := Check{Name: "job's process", Status: StatusFail, Fix: "a bug in telling a job's processes from the owner's: report it with this output"}
	var av attest.Availability
	listed := waitFor(ctx, listWait, func() bool {
		av, _ = mon.Check(ctx)
		return len(processesOn(av, g.Index)) > 0
	})
	switch {
	case !listed:
		c.Detail = "the driver lists no compute process on " + g.UUID + " while the job holds a CUDA context there"
		c.Fix = "nvidia-smi should list the job's process; a driver in a container may hide host PIDs"
	case av.Withdrawn[g.Index] != "":
		c.Detail = "the job's own process withdrew its GPU: " + av.Withdrawn[g.Index]
	default:
		c.Status, c.Fix = StatusPass, ""
		c.Detail = fmt.Sprintf("the driver lists the job's process (pid %v) on %s, and the GPU stays offered", processesOn(av, g.Index), g.UUID)
	}
	return c
}

// ownerProcessCheck runs the probe on the host, on g, as the owner's own
// work would, and passes when the monitor withdraws g for its PID.
func ownerProcessCheck(ctx context.Context, o GPUCheckOptions, mon *attest.Monitor, g attest.GPU) Check {
	c := Check{Name: "owner's process", Status: StatusSkip}
	if o.ProbeBin == "" {
		c.Detail = "skipped: no CUDA probe binary to run on the host (scripts/gpu-check.sh passes one)"
		return c
	}
	c.Status = StatusFail
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	cmd := exec.CommandContext(pctx, o.ProbeBin, "-hold", probeHold.String())
	cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES="+g.UUID) // CUDA takes UUIDs there
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		c.Detail = "the probe did not start on the host: " + err.Error()
		return c
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, ok := parseProbe(line); !ok {
		c.Detail = fmt.Sprintf("the probe on the host opened no CUDA context: %q %v", line, err)
		c.Fix = "run " + o.ProbeBin + " -hold 1s by hand; it must print a context line"
		return c
	}
	pid := cmd.Process.Pid
	want := fmt.Sprintf("pid %d", pid)
	var why string
	if waitFor(ctx, listWait, func() bool {
		av, _ := mon.Check(ctx)
		why = av.Withdrawn[g.Index]
		return strings.Contains(why, want)
	}) {
		c.Status, c.Detail = StatusPass, fmt.Sprintf("a CUDA process of no job (pid %d) on %s withdraws it: %s", pid, g.UUID, why)
	} else {
		c.Detail = fmt.Sprintf("a CUDA process of no job (pid %d) on %s did not withdraw it (withdrawn: %q)", pid, g.UUID, why)
		c.Fix = "a bug in telling the owner's processes from a job's: report it with this output"
	}
	return c
}

func processesOn(av attest.Availability, index int) []int {
	for _, g := range av.Inventory.GPUs {
		if g.Index == index {
			var pids []int
			for _, p := range g.Processes {
				pids = append(pids, p.PID)
			}
			return pids
		}
	}
	return nil
}

// waitFor calls done every 100 ms until it returns true (true), or
// until d has passed or ctx ended (false).
func waitFor(ctx context.Context, d time.Duration, done func() bool) bool {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return waitUntil(wctx, 100*time.Millisecond, done)
}

// waitUntil calls done every interval until it returns true (true) or
// ctx ends (false).
func waitUntil(ctx context.Context, every time.Duration, done func() bool) bool {
	t := time.NewTicker(every)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
