package node

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/libp2p/go-libp2p/core/network"
)

// gpuMonitorPoll is the e2e tests' GPU monitor interval: short, so that
// several polls pass in a fraction of a second.
const gpuMonitorPoll = 50 * time.Millisecond

// gpuRig is a provider node whose GPU source is an attest.Fake that the
// test edits (its compute processes, its health), read by the node's own
// GPU monitor, with real Docker job containers and a hostile renter.
type gpuRig struct {
	*hostileRig
	fake *attest.Fake
	inv  attest.Inventory // what the fake serves, before the test's edits
}

func newGPURig(t *testing.T) *gpuRig {
	// One GPU as the simulated source describes it: marked simulated, so
	// that a job container runs on it without an NVIDIA runtime; the
	// owner's rules and the health watch judge it like any GPU.
	sim, err := attest.NewSimulatedSeed("1xRTX4090", "gpu-e2e")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := sim.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	inv.GPUs[0].Health = attest.Health{XidKnown: true, ECCKnown: true} // a driver that reports both
	fake := attest.NewFake(inv)
	r := newHostileRig(t, Options{GPUSource: fake, GPUMonitorInterval: gpuMonitorPoll}, nil)
	return &gpuRig{hostileRig: r, fake: fake, inv: inv}
}

// serve makes the fake list procs on GPU 0 with health h.
func (g *gpuRig) serve(procs []attest.Process, h attest.Health) {
	inv := g.inv.Clone()
	inv.GPUs[0].Processes, inv.GPUs[0].Health = procs, h
	inv.GPUs[0].Health.XidKnown, inv.GPUs[0].Health.ECCKnown = true, true
	g.fake.Set(inv)
}

// polls waits until the node's monitor has read the fake n more times.
func (g *gpuRig) polls(t *testing.T, n int) {
	t.Helper()
	from := g.fake.Calls()
	waitFor(t, 10*time.Second, fmt.Sprintf("%d GPU monitor polls", n), func() bool { return g.fake.Calls() >= from+n })
}

// rpcCall calls method over the node's JSON-RPC API.
func (g *gpuRig) rpcCall(t *testing.T, method string, params, res any) error {
	t.Helper()
	tok, err := g.prov.repo.Token()
	if err != nil {
		t.Fatal(err)
	}
	return rpc.NewClient(g.prov.RPCURL(), tok).Call(g.ctx, method, params, res)
}

// gpu0 is GPU 0's state as offer_show reports it.
func (g *gpuRig) gpu0(t *testing.T) GPUStatus {
	t.Helper()
	var res OfferShowResult
	if err := g.rpcCall(t, "offer_show", nil, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.GPUs) != 1 {
		t.Fatalf("offer_show lists %d GPUs, want 1: %+v", len(res.GPUs), res)
	}
	return res.GPUs[0]
}

// startRunning leases job on GPU 0 and starts it, returning its event
// stream once the provider reports it running.
func (g *gpuRig) startRunning(t *testing.T, job string) network.Stream {
	t.Helper()
	spec := hostileSpec(job, "120s")
	s := g.start(g.lease(job, spec), spec)
	for ev := nextEvent(t, s, "status"); ev.Status != "running"; ev = nextEvent(t, s, "status") {
		if ev.Type == "error" {
			t.Fatalf("start of %s: %+v", job, ev)
		}
	}
	return s
}

// containerPID is the host PID of job's container's main process, read
// from `docker inspect`, apart from the executor's own mapping.
func containerPID(t *testing.T, job string) int {
	t.Helper()
	out, err := exec.Command("docker", "ps", "--filter", "label=net.gleaner.managed=1",
		"--format", "{{.ID}} {{.Label \"net.gleaner.job\"}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.HasSuffix(f[1], "-"+job) {
			pid, err := exec.Command("docker", "inspect", "--format", "{{.State.Pid}}", f[0]).CombinedOutput()
			if err != nil {
				t.Fatalf("docker inspect %s: %v: %s", f[0], err, pid)
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(pid)))
			if err != nil || n <= 0 {
				t.Fatalf("docker inspect %s: State.Pid %q", f[0], pid)
			}
			return n
		}
	}
	t.Fatalf("no running container of job %s: %s", job, out)
	return 0
}

// The node's own GPU monitor, reading a fake NVML source, with real job
// containers (issue 32): a GPU whose compute processes are its running
// job's stays offered, and the job runs; a process of no job beside them
// withdraws it and preempts the bronze lease as the owner's reclaim; an
// Xid ends the job on it with the typed fault reason, offer_show shows
// the GPU faulted, and offer_clear_fault offers it again.
func TestTheGPUMonitorKnowsTheJobsProcessesFromTheOwners(t *testing.T) {
	g := newGPURig(t)

	t.Run("the job's processes keep the GPU, a foreign one reclaims it", func(t *testing.T) {
		const job = "gpu-own-procs"
		s := g.startRunning(t, job)
		pid := containerPID(t, job)
		g.serve([]attest.Process{{PID: pid, UsedMiB: 1024, Name: "demo"}}, attest.Health{})
		for range 5 { // several polls, each one judging the job's PID
			g.polls(t, 2)
			if st := g.gpu0(t); st.Withdrawn != "" || !st.Offered {
				t.Fatalf("the job's own process %d withdrew its GPU: %+v", pid, st)
			}
			if c := containers(t, job); len(c) != 1 || !strings.Contains(c[0], "running") {
				t.Fatalf("the job stopped while its GPU only ran its own process: %v", c)
			}
		}
		if cur := g.prov.provider.Current(); cur == nil || len(cur.GPUs) != 1 {
			t.Fatalf("the signed offer lost the GPU its own job computes on: %+v", cur)
		}

		const foreign = 4242
		g.serve([]attest.Process{{PID: pid, UsedMiB: 1024}, {PID: foreign, UsedMiB: 512, Name: "blender"}}, attest.Health{})
		ev := nextEvent(t, s, "exit")
		if ev.Type != "exit" || ev.Status != "preempted" || !strings.Contains(ev.Error, sched.ReasonReclaimed) ||
			!strings.Contains(ev.Error, fmt.Sprintf("busy with the owner's processes (pid %d)", foreign)) {
			t.Fatalf("the bronze job's end after the owner's process appeared: %+v, want preempted: %s: busy with the owner's processes (pid %d)",
				ev, sched.ReasonReclaimed, foreign)
		}
		// (Once the container is gone, the fake still lists its PID, as a
		// driver may for a moment: then it is no job's either.)
		if st := g.gpu0(t); !strings.Contains(st.Withdrawn, "busy with the owner's processes") || !strings.Contains(st.Withdrawn, strconv.Itoa(foreign)) {
			t.Fatalf("offer_show: %+v, want GPU 0 withdrawn for pid %d", st, foreign)
		}

		g.serve(nil, attest.Health{}) // the owner is done
		waitFor(t, 10*time.Second, "GPU 0 offered again", func() bool { st := g.gpu0(t); return st.Offered && st.Withdrawn == "" })
	})

	t.Run("an Xid ends the job with the fault reason until the owner clears it", func(t *testing.T) {
		const job = "gpu-xid"
		s := g.startRunning(t, job)
		pid := containerPID(t, job)
		g.serve([]attest.Process{{PID: pid, UsedMiB: 1024}}, attest.Health{})
		g.polls(t, 2)
		g.serve([]attest.Process{{PID: pid, UsedMiB: 1024}}, attest.Health{Xids: 1, LastXid: 79})
		ev := nextEvent(t, s, "exit")
		if ev.Type != "exit" || ev.Status != "preempted" || !strings.Contains(ev.Error, sched.ReasonGPUFault) || !strings.Contains(ev.Error, "Xid 79") {
			t.Fatalf("the job's end after an Xid on its GPU: %+v, want preempted: %s: ... Xid 79", ev, sched.ReasonGPUFault)
		}
		st := g.gpu0(t)
		if !strings.Contains(st.Fault, "Xid 79") || st.Withdrawn == "" || st.Offered {
			t.Fatalf("offer_show after the Xid: %+v, want GPU 0 faulted and withdrawn", st)
		}
		// The job's container gone, the fault still holds the GPU.
		g.serve(nil, attest.Health{Xids: 1, LastXid: 79})
		g.polls(t, 3)
		if st := g.gpu0(t); st.Fault == "" {
			t.Fatalf("the fault did not latch: %+v", st)
		}

		// The owner inspected the card and clears the fault.
		var res ClearFaultResult
		if err := g.rpcCall(t, "offer_clear_fault", ClearFaultParams{GPU: ptrTo(0)}, &res); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Cleared, "Xid 79") || !res.Polled || res.Status == nil || res.Status.Fault != "" || res.Status.Withdrawn != "" {
			t.Fatalf("offer_clear_fault: %+v (status %+v)", res, res.Status)
		}
		waitFor(t, 10*time.Second, "GPU 0 offered after the clear", func() bool { return g.gpu0(t).Offered })
		var re *rpc.Error
		if err := g.rpcCall(t, "offer_clear_fault", ClearFaultParams{GPU: ptrTo(0)}, &res); !errors.As(err, &re) || re.Code != CodeGPUNotFaulted {
			t.Fatalf("clearing a sound GPU: %v, want code %d", err, CodeGPUNotFaulted)
		}
		if err := g.rpcCall(t, "offer_clear_fault", ClearFaultParams{GPU: ptrTo(3)}, &res); !errors.As(err, &re) || re.Code != CodeNoSuchGPU {
			t.Fatalf("clearing GPU 3 of 1: %v, want code %d", err, CodeNoSuchGPU)
		}
		if err := g.rpcCall(t, "offer_clear_fault", struct{}{}, &res); !errors.As(err, &re) || re.Code != rpc.CodeInvalidParams {
			t.Fatalf("offer_clear_fault without gpu: %v, want invalid params", err)
		}

		// A new Xid after the clear faults it again.
		g.serve(nil, attest.Health{Xids: 2, LastXid: 48})
		waitFor(t, 10*time.Second, "GPU 0 faulted anew", func() bool { return strings.Contains(g.gpu0(t).Fault, "Xid 48") })

		// A fault that arrives as the owner clears the last one: the
		// answer is of a poll after the clear, so it shows the GPU faulted
		// anew (or, had the monitor read the new Xid first, that one
		// cleared and the GPU offered), never the cleared fault as news.
		// attest's TestClearFaultOffersTheGPUAgainUntilANewFault fixes
		// the order.
		g.serve(nil, attest.Health{Xids: 3, LastXid: 94})
		if err := g.rpcCall(t, "offer_clear_fault", ClearFaultParams{GPU: ptrTo(0)}, &res); err != nil {
			t.Fatal(err)
		}
		after := res.Status
		newFault := strings.Contains(res.Cleared, "Xid 48") && after != nil && strings.Contains(after.Fault, "Xid 94") && !after.Offered
		readFirst := strings.Contains(res.Cleared, "Xid 94") && after != nil && after.Fault == "" && after.Offered
		if !res.Polled || !(newFault || readFirst) {
			t.Fatalf("offer_clear_fault as a new fault arrives: %+v (status %+v), want Xid 48 cleared and GPU 0 faulted by Xid 94", res, after)
		}
		t.Logf("the new Xid was read after the clear: %v", newFault)
	})
}

func ptrTo[T any](v T) *T { return &v }
