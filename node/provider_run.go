package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/libp2p/go-libp2p/core/network"
)

// handleJob serves /job/1: "start" runs a leased job and streams its events
// until it exits; "cancel" stops it. Only the lease's renter may do either.
func (pj *providerJobs) handleJob(s network.Stream) {
	defer s.Close()
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req jobRequest
	if err := readMsg(s, &req); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.SetReadDeadline(time.Time{})
	l, _, err := auction.DecodeSignedLease(req.Lease, true)
	if err == nil && l.Renter != s.Conn().RemotePeer().String() {
		err = errors.New("only the lease's renter may control its job")
	}
	var al *activeLease
	if err == nil {
		pj.mu.Lock()
		al = pj.leases[l.JobID]
		pj.mu.Unlock()
		if al == nil {
			err = errors.New("no active lease for this job")
		}
	}
	if err != nil {
		_ = writeMsg(s, jobEvent{Type: "error", Error: err.Error(), Time: time.Now()})
		return
	}
	switch req.Kind {
	case "cancel":
		pj.cancel(al)
		_ = writeMsg(s, jobEvent{Type: "status", Status: "cancelled", Time: time.Now()})
	case "start":
		pj.run(s, al, req)
	default:
		_ = writeMsg(s, jobEvent{Type: "error", Error: fmt.Sprintf("unknown request %q", req.Kind), Time: time.Now()})
	}
}

func (pj *providerJobs) cancel(al *activeLease) {
	pj.mu.Lock()
	job := al.job
	pj.mu.Unlock()
	if job != nil {
		ctx, cancel := context.WithTimeout(pj.bg, time.Duration(al.lease.NoticeSec)*time.Second+10*time.Second)
		defer cancel()
		_ = job.Stop(ctx, time.Duration(al.lease.NoticeSec)*time.Second)
	}
}

// run starts the container and streams status, logs and the exit code. The
// lease's end stops the job; the container is removed whatever happens.
func (pj *providerJobs) run(s network.Stream, al *activeLease, req jobRequest) {
	defer pj.release(al.lease.JobID)
	send := func(ev jobEvent) error { ev.Time = time.Now(); return writeMsg(s, ev) }
	spec, err := auction.ParseJobSpec(req.Spec)
	if err != nil {
		_ = send(jobEvent{Type: "error", Error: "bad job spec: " + err.Error()})
		return
	}
	es := pj.execSpec(al, spec, req.Secrets)
	ctx, cancel := context.WithDeadline(pj.bg, time.Unix(al.lease.End, 0))
	defer cancel()
	_ = send(jobEvent{Type: "status", Status: "pulling"})
	job, err := pj.exec.Start(ctx, es, executor.Hooks{})
	if err != nil {
		_ = send(jobEvent{Type: "error", Error: "start: " + err.Error()})
		return
	}
	pj.mu.Lock()
	al.job = job
	pj.mu.Unlock()
	defer func() {
		rctx, rcancel := context.WithTimeout(pj.bg, 30*time.Second)
		defer rcancel()
		if err := job.Remove(rctx); err != nil {
			pj.log.Warn("job container not removed; Reconcile will", "job", al.lease.JobID, "err", err)
		}
	}()
	_ = send(jobEvent{Type: "status", Status: "running"})

	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sub := job.Logs().Subscribe()
		defer sub.Close()
		for {
			chunk, err := sub.Next(pj.bg)
			if err != nil {
				return
			}
			for len(chunk) > 0 {
				n := min(len(chunk), 16<<10)
				if send(jobEvent{Type: "log", Log: chunk[:n]}) != nil {
					return
				}
				chunk = chunk[n:]
			}
		}
	}()
	res, err := job.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		sctx, scancel := context.WithTimeout(pj.bg, time.Duration(al.lease.NoticeSec)*time.Second+10*time.Second)
		_ = job.Stop(sctx, time.Duration(al.lease.NoticeSec)*time.Second)
		scancel()
		res, err = job.Wait(pj.bg)
	}
	<-logsDone
	if err != nil {
		_ = send(jobEvent{Type: "error", Error: err.Error()})
		return
	}
	status := "completed"
	if res.Stopped {
		status = "stopped"
	}
	_ = send(jobEvent{Type: "exit", Status: status, ExitCode: res.ExitCode})
}

// execSpec turns the lease and the renter's spec into the executor's
// limits. The renter asked for cpus and memory; a spec that names none
// gets one core and 2 GiB per GPU, never unlimited.
func (pj *providerJobs) execSpec(al *activeLease, spec *auction.JobSpec, secrets map[string]string) executor.Spec {
	pj.p.mu.Lock()
	inv := pj.p.avail.Inventory
	egress := pj.p.settings.Policy.Egress
	pj.p.mu.Unlock()
	es := executor.Spec{
		JobID: pj.tag + "-" + al.lease.JobID, LeaseCID: leaseCID(al.raw), Image: spec.Image, Command: spec.Command, Env: spec.Env,
		Secrets: executor.Secrets(secrets), CPUs: float64(max(spec.Resources.CPUs, al.lease.GPUs)),
		MemoryMiB: int64(max(spec.Resources.MemoryGB*1000, 2048*al.lease.GPUs)), Pids: 1024,
		Egress: egress, CheckpointPath: spec.Checkpoint.Path,
	}
	for _, g := range al.gpus {
		if g < len(inv.GPUs) {
			es.GPUUUIDs = append(es.GPUUUIDs, inv.GPUs[g].UUID)
			es.SimulatedGPUs = es.SimulatedGPUs || inv.GPUs[g].Simulated
		}
	}
	return es
}
