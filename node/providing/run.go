package providing

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
)

// HandleJob serves /job/3: "start" runs a leased job and streams its events
// until it exits; "attach" follows a running job again (a renter whose node
// restarted); "cancel" stops it. Only the lease's renter may do any.
func (pj *Provider) HandleJob(s network.Stream) {
	pj.serveJob(s, s.Conn().RemotePeer().String())
}

// serveJob is HandleJob's work on a stream from the peer from.
func (pj *Provider) serveJob(s Stream, from string) {
	defer s.Close()
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	// The head first, a small frame: the large body of a start is read
	// only once the head's lease shows an active lease of this peer's
	// (wire/jobreq.go), so a stranger cannot make us buffer megabytes.
	head, err := wire.ReadJobHead(s)
	if err != nil {
		_ = s.Reset()
		return
	}
	l, _, err := auction.DecodeSignedLease(head.Lease, true)
	if err == nil && l.Renter != from {
		err = errors.New("only the lease's renter may control its job")
	}
	var al *activeLease
	if err == nil {
		pj.mu.Lock()
		al = pj.leases[l.JobID]
		pj.mu.Unlock()
		if al == nil {
			if head.Kind == "attach" {
				// The renter lost us while the job ran, and comes back
				// after its end: it hears how the run ended, as it would
				// have on its stream, rather than that the lease is gone
				// (which it would take for our failure).
				// Its time stays the run's end: the renter's record of
				// when the job ended.
				if final, ok := pj.finalOf(l.JobID, head.Lease); ok {
					if writeTail(s, pj.tails.of(l.JobID, wire.LeaseCID(head.Lease), time.Now())) == nil {
						_ = wire.Write(s, final)
					}
					return
				}
			}
			err = pj.gone(l.JobID)
		} else if wire.LeaseCID(al.raw) != wire.LeaseCID(head.Lease) {
			// Another lease of the job holds it now (an award superseded
			// by its renter's new one): this one is over.
			err = errSuperseded
		}
	}
	if err != nil {
		_ = wire.Write(s, errorEvent(err))
		return
	}
	if head.Kind == "start" {
		if err := pj.mayStart(al); err != nil {
			_ = wire.Write(s, errorEvent(err))
			return
		}
	}
	var body wire.JobBody
	if head.Kind == "start" {
		if body, err = wire.ReadJobBody(s); err != nil {
			_ = s.Reset()
			return
		}
	}
	_ = s.SetReadDeadline(time.Time{})
	req := head.WithBody(body)
	switch req.Kind {
	case "attach":
		pj.attach(s, al)
	case "cancel":
		pj.cancel(al)
		_ = wire.Write(s, wire.Event{Type: wire.EventStatus, Status: wire.StatusCancelled, Time: time.Now()})
	case "start":
		// Checked before run takes charge of the lease: a refused start
		// (another spec, a second start) must not end the lease that a
		// first start may be running.
		spec, err := pj.checkStart(al, req.Spec)
		if err != nil {
			_ = wire.Write(s, errorEvent(err))
			return
		}
		pj.run(s, al, req, spec)
	default:
		_ = wire.Write(s, wire.Event{Type: wire.EventError, Error: fmt.Sprintf("unknown request %q", req.Kind), Time: time.Now()})
	}
}

// gone is why this provider holds no lease for jobID: the scheduler
// remembers how the job's last lease ended, so that the renter of an
// award displaced by the newcomer rule hears that (CodeDisplaced: its own
// slowness, nobody failed), not that the provider dropped it.
func (pj *Provider) gone(jobID string) error {
	if st, ok := pj.sched.Ended(jobID); ok && st == sched.Displaced {
		return sched.ErrDisplaced
	}
	return errNoLease
}

func (pj *Provider) cancel(al *activeLease) {
	if pj.releaseUnstarted(al) {
		return
	}
	pj.mu.Lock()
	job := al.job
	if job == nil {
		// A run waiting to begin ends; one whose container is being made
		// finds it closed once its job is set (running) and stops it
		// then. Closed under pj.mu, as running reads it, so that neither
		// misses the other.
		al.cancelOnce.Do(func() { close(al.cancelled) })
	}
	pj.mu.Unlock()
	if job != nil {
		pj.stopCancelled(al, job)
	}
}

// releaseUnstarted ends at once an award its renter lets go before
// starting it (a gang whose other member could not be placed): no start
// came, so no run will ever watch the lease, which would otherwise hold
// its GPUs until the start deadline and then count against the renter as
// an award left unstarted. Nothing ran, so the settlement charges
// nothing. It reports whether al was such an award.
func (pj *Provider) releaseUnstarted(al *activeLease) bool {
	info, ok := pj.sched.Lease(al.lease.JobID, time.Now())
	if !ok || info.State != sched.Awarded || !info.IsLease(al.lease) {
		return false
	}
	if err := pj.saveLease(al.lease.JobID, al.raw, LeaseEnded); err != nil {
		pj.log.Warn("lease state not saved", "job", al.lease.JobID, "err", err)
	}
	pj.log.Info("award let go unstarted by its renter", "job", al.lease.JobID, "renter", al.lease.Renter)
	pj.settle(al, nil, false)
	pj.release(al.lease.JobID)
	return true
}

// stopCancelled stops a cancelled job with the lease's notice.
func (pj *Provider) stopCancelled(al *activeLease, job executor.Job) {
	ctx, cancel := context.WithTimeout(pj.bg, time.Duration(al.lease.NoticeSec)*time.Second+10*time.Second)
	defer cancel()
	_ = job.Stop(ctx, time.Duration(al.lease.NoticeSec)*time.Second)
}

// run starts the container and streams status, logs, heartbeats and the
// exit: launchJob, then follow. The lease's end stops the job; an owner
// reclaiming a bronze job's GPU preempts it with the lease's notice and
// ships its checkpoint back; the container is removed whatever happens.
func (pj *Provider) run(s Stream, al *activeLease, req wire.JobRequest, spec *auction.JobSpec) {
	al.hub.add(s)
	defer al.hub.detach(s) // last: s has every event sent before HandleJob closes it
	// Heartbeats from the first moment, not only once the container runs:
	// a gold reservation waits for its window, an image pull can take
	// minutes, and a renter hears nothing else meanwhile. Telemetry joins
	// them once the job runs.
	hb := pj.heartbeats(al.hub.send)
	defer hb.stop()
	ctx, cancel := context.WithDeadline(pj.bg, time.Unix(al.lease.End, 0))
	defer cancel()
	defer pj.leaveGang(al) // joined by launchJob, on this goroutine
	job, kept := pj.launchJob(ctx, al, req, spec)
	if job == nil {
		if !kept {
			pj.endUnrun(al)
		}
		return
	}
	pj.openGang(ctx, al, job)
	pj.launchedHook(al.lease.JobID)
	m := newMeter(al.lease, wire.LeaseCID(al.raw))
	pj.running(al, job, m, time.Now())
	hb.telemetry(pj.samplers(al, req.Nonce))
	go m.readVouchers(s, pj.onPaid(al))
	pj.follow(ctx, al, job, m)
}

// endUnrun ends a lease whose job never ran. Every lease that ends is
// settled before its GPUs are free, in this node's feed order: that order
// is what shows a GPU was released before it was leased again (see
// node/fraud.go). The settlement, with no meter, charges nothing and
// cites no voucher.
func (pj *Provider) endUnrun(al *activeLease) {
	if pj.crashed() {
		return
	}
	pj.settle(al, nil, false)
	if err := pj.saveLease(al.lease.JobID, al.raw, LeaseEnded); err != nil {
		pj.log.Warn("lease state not saved", "job", al.lease.JobID, "err", err)
	}
	pj.release(al.lease.JobID)
}

// launchJob waits for the scheduler's launch (a reservation's window, GPUs
// handed over from preempted bronze jobs) and starts the job. nil: it did
// not run; kept: this node is stopping before it began, and the lease is
// kept, unsettled, to be held again when the node starts (see Restore);
// otherwise the caller ends the lease (endUnrun). A job it returns is
// launching until the caller makes it the lease's (running).
func (pj *Provider) launchJob(ctx context.Context, al *activeLease, req wire.JobRequest, spec *auction.JobSpec) (job executor.Job, kept bool) {
	// A stop calls the start off once it has begun (beginLaunch): ctx
	// ends then, and with it the making and the start of the container.
	ctx, callOff := context.WithCancelCause(ctx)
	defer callOff(nil)
	defer func() {
		if job == nil {
			pj.mu.Lock()
			al.endLaunch()
			pj.mu.Unlock()
		}
	}()
	send := al.hub.send
	es := pj.execSpec(al, spec, req.Secrets)
	es.Restore = req.Checkpoint
	al.outputMax = spec.Outputs.MaxBytes
	if err := pj.joinGang(al, req, spec, &es); err != nil {
		_ = send(wire.Event{Type: wire.EventError, Status: wire.StatusNotStarted, Error: "gang network: " + err.Error()})
		return nil, false
	}
	if a := req.RegistryAuth; a != nil {
		if err := a.Validate(); err != nil {
			_ = send(wire.Event{Type: wire.EventError, Status: wire.StatusNotStarted, Code: wire.CodePull, Error: PullFailed + err.Error()})
			return nil, false
		}
		es.RegistryAuth = &executor.RegistryAuth{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, ServerAddress: a.Server}
	}
	// Inputs first, also for a reservation waiting for its window: its
	// data is here by its start (cache warming), and a CID nobody serves
	// fails before anything is billed.
	if err := pj.fetchInputs(ctx, al, spec, &es, send); err != nil {
		select {
		case <-al.cancelled:
			_ = send(wire.Event{Type: wire.EventExit, Status: wire.StatusStopped, Error: "cancelled by the renter before it began"})
			return nil, false
		default:
		}
		if pj.bg.Err() != nil {
			return nil, pj.saveLease(al.lease.JobID, al.raw, LeaseStarted) == nil // held again at the next start (Restore)
		}
		_ = send(wire.Event{Type: wire.EventError, Status: wire.StatusNotStarted, Code: wire.CodeInputs, Error: InputsFailed + err.Error()})
		return nil, false
	}
	var ready <-chan ahead // a reservation's job, made ready ahead
	select {
	case <-al.launch:
	default:
		// GPUs handed over from preempted bronze jobs, or a gold
		// reservation whose window has not begun: the scheduler launches
		// it when it may run. Its job is made ready meanwhile (image
		// pulled, container created), so that it begins at its start.
		_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusReserved, Error: "starts " + time.Unix(al.lease.Start, 0).UTC().Format(time.RFC3339)})
		if time.Unix(al.lease.Start, 0).After(time.Now()) {
			ready = pj.prepare(ctx, al, es, send)
		}
		select {
		case <-al.launch:
		case a := <-al.ctrl:
			if a.Kind.Ends() {
				if ready != nil {
					pj.discard(ready, false)
				}
				_ = send(wire.Event{Type: wire.EventExit, Status: wire.StatusPreempted, Error: a.Message()})
				return nil, false
			}
		case <-al.cancelled:
			if ready != nil {
				pj.discard(ready, false)
			}
			_ = send(wire.Event{Type: wire.EventExit, Status: wire.StatusStopped, Error: "cancelled by the renter before it began"})
			return nil, false
		case <-ctx.Done():
			if ready != nil {
				pj.discard(ready, true) // its making ends with ctx
			}
			return nil, pj.bg.Err() != nil
		}
	}
	// From here the job is launching, unless this node is stopping: then
	// it must not start, and its lease is kept like any that had not
	// launched (see Shutdown).
	if !pj.beginLaunch(al, callOff) {
		if ready != nil {
			callOff(errStopping)
			pj.discard(ready, true) // its making ends with ctx
		}
		return nil, pj.saveLease(al.lease.JobID, al.raw, LeaseStarted) == nil
	}
	// Recorded before the container exists: a provider that restarts
	// from here on adopts the job's container if it runs, and ends the
	// lease if it does not, while one that restarts before holds the
	// lease again, to be started again (see Restore). Unrecorded, the
	// job must not run: a crash would let it start a second time.
	if err := pj.saveLease(al.lease.JobID, al.raw, LeaseLaunched); err != nil {
		pj.log.Warn("lease state not saved: not starting its job", "job", al.lease.JobID, "err", err)
		_ = send(wire.Event{Type: wire.EventError, Error: "the provider cannot record the lease's start: " + err.Error()})
		if ready != nil {
			pj.discard(ready, false)
		}
		return nil, false
	}
	var err error
	if ready != nil {
		if a := <-ready; a.job != nil {
			began := time.Now()
			job, err = a.job, a.job.Begin(ctx)
			if err == nil {
				pj.noteBegin(time.Since(began))
			}
		}
	}
	if job == nil {
		_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusPulling})
		pj.pulling(al.lease.JobID)
		job, err = pj.exec.Start(ctx, es, pullHooks(send))
	}
	if err != nil && (pj.bg.Err() != nil || calledOff(ctx)) {
		// Stopping while the job was being started: nothing ran, and the
		// lease is kept for Restore like any that had not launched.
		return nil, pj.saveLease(al.lease.JobID, al.raw, LeaseStarted) == nil
	}
	if err != nil {
		// The job never ran: its settlement charges nothing and cites no
		// voucher, and the renter, told it did not start, auctions it
		// again elsewhere.
		why, code := "the job could not start: ", wire.CodeStart
		if ready != nil {
			pj.failedReservation(al, err)
			why = "the reservation could not start: "
		}
		if isPullError(err) {
			why, code = PullFailed, wire.CodePull
		}
		_ = send(wire.Event{Type: wire.EventError, Status: wire.StatusNotStarted, Code: code, Error: why + err.Error()})
		return nil, false
	}
	return job, false
}

// running hands the scheduler a launched lease's job, running since
// since (its billing clock starts there, or at the lease's start if
// later), and makes it the lease's: attach and cancel reach it from now.
func (pj *Provider) running(al *activeLease, job executor.Job, m *meter, since time.Time) {
	if err := pj.sched.Running(al.lease.JobID, since); err != nil {
		pj.log.Warn("scheduler: running", "job", al.lease.JobID, "err", err)
	}
	if total, _ := m.settled(); total > 0 {
		_ = pj.sched.PaidTotal(al.lease.JobID, total)
	}
	pj.mu.Lock()
	al.job, al.meter = job, m
	al.endLaunch() // with the job set: a stop that waited for the launch finds it
	var cancelled bool
	select {
	case <-al.cancelled: // cancelled while its container was made: nothing else will stop it
		cancelled = true
	default:
	}
	pj.mu.Unlock()
	if cancelled {
		go pj.stopCancelled(al, job)
	}
}

// heartbeat sends a heartbeat, and the telemetry of the leased GPUs once
// the job runs, every wire.HeartbeatEvery until stopped.
type heartbeat struct {
	samplers atomic.Pointer[map[string]*attest.Sampler]
	done     chan struct{}
}

func (pj *Provider) heartbeats(send func(wire.Event) error) *heartbeat {
	hb := &heartbeat{done: make(chan struct{})}
	go func() {
		t := time.NewTicker(wire.HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-hb.done:
				return
			case <-t.C:
				_ = send(wire.Event{Type: wire.EventHeartbeat})
				if sm := hb.samplers.Load(); sm != nil {
					for _, raw := range pj.sample(*sm) {
						_ = send(wire.Event{Type: wire.EventTelemetry, Log: raw})
					}
				}
			}
		}
	}()
	return hb
}

func (hb *heartbeat) telemetry(sm map[string]*attest.Sampler) { hb.samplers.Store(&sm) }
func (hb *heartbeat) stop()                                   { close(hb.done) }

// follow does what a running job needs until it ends, for a job this run
// started or one adopted after a restart: it streams the job's output to
// the lease's followers, carries out the scheduler's actions (pause,
// resume, stop as unpaid, stop at the lease's end, preempt), settles the
// lease once by m, records it ended, frees its GPUs and removes the
// container. ctx ends with the lease, or when this node stops, which
// stops the job. A provider that crashed (SimulateCrash) leaves it all as
// it is.
func (pj *Provider) follow(ctx context.Context, al *activeLease, job executor.Job, m *meter) {
	send := al.hub.send
	// drain, once the job is being stopped or has exited, has the
	// forwarder refuse new streams to it: the renter's gateway sends new
	// requests to its other replicas at once (a refused dial is retried),
	// instead of to an address that is about to go, or has gone with the
	// container's network.
	drain := func() {}
	if pj.serve(ctx, al, job) {
		defer pj.onServiceEnd(al.lease.JobID)
		if pj.onServiceDrain != nil {
			drain = sync.OnceFunc(func() { pj.onServiceDrain(al.lease.JobID) })
		}
	}
	defer func() {
		if pj.crashed() {
			return // its container runs on, for the next start to adopt
		}
		// The GPUs are free once the job has exited and its followers have
		// its last event; removing the container can take a second and must
		// not hold them (a renter submitting again at once would be told
		// the provider is full).
		// Out of its gang's network before the GPUs are free: the
		// gang's next placement may start a member here at once.
		pj.leaveGang(al)
		al.hub.flush(drainWait)
		pj.release(al.lease.JobID)
		// Not pj.bg alone: on shutdown it is already cancelled, and the
		// renter's container must still go.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(pj.bg), 30*time.Second)
		defer rcancel()
		if err := job.Remove(rctx); err != nil {
			pj.log.Warn("job container not removed; Reconcile will", "job", al.lease.JobID, "err", err)
		}
	}()
	_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusRunning})

	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		logs := job.Logs()
		sub := logs.Subscribe()
		defer sub.Close()
		// Each chunk carries its offset in the output, so that a renter
		// attaching again keeps only what it has not had (see attach).
		// The subscription begins at the oldest retained byte.
		read := logs.Written() - int64(len(logs.Bytes()))
		for {
			chunk, err := sub.Next(pj.bg)
			if err != nil {
				return
			}
			at := read + sub.Skipped()
			read += int64(len(chunk))
			for len(chunk) > 0 {
				n, off := min(len(chunk), wire.MaxLogChunk), at
				if send(wire.Event{Type: wire.EventLog, Log: chunk[:n], Offset: &off, LogRun: al.logRun}) != nil {
					return
				}
				chunk, at = chunk[n:], at+int64(n)
			}
		}
	}()

	type waited struct {
		res executor.Result
		err error
	}
	done := make(chan waited, 1)
	go func() { r, err := job.Wait(ctx); done <- waited{r, err} }()
	notice := time.Duration(al.lease.NoticeSec) * time.Second
	// stopIn stops the job with notice (the lease's, or a Preempt's own:
	// none for a job that escaped its GPUs, which is killed at once).
	stopIn := func(notice time.Duration) waited {
		drain()
		bg := context.WithoutCancel(pj.bg)
		sctx, scancel := context.WithTimeout(bg, notice+10*time.Second)
		defer scancel()
		_ = job.Stop(sctx, notice)
		r, err := job.Wait(sctx)
		return waited{r, err}
	}
	stop := func() waited { return stopIn(notice) }
	var w waited
	preempted, unpaid := "", false
	// The scheduler bills: it says when to pause (no voucher covers the
	// time run plus the grace), resume, stop as unpaid, stop at the lease's
	// end, or preempt (the owner reclaims, the window closes, a higher
	// tier needs the GPUs).
loop:
	for {
		select {
		case w = <-done:
			if pj.crashed() {
				return
			}
			drain()
			if ctx.Err() != nil { // the lease ended, or this node is stopping
				w = stop()
			}
			break loop
		case a := <-al.ctrl:
			if pj.crashed() {
				return
			}
			switch a.Kind {
			case sched.Pause:
				if err := job.Pause(ctx); err != nil {
					pj.log.Warn("pause failed: stopping the job", "job", al.lease.JobID, "err", err)
					unpaid, w = true, stop()
					break loop
				}
				pj.log.Info("job paused: no voucher covers the time run", "job", al.lease.JobID, "renter", al.lease.Renter,
					"patience", sched.Patience(al.lease))
				_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusPaused, Error: "no voucher covers the time run"})
			case sched.Resume:
				if job.Resume(ctx) == nil {
					_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusRunning})
				}
			case sched.StopUnpaid:
				pj.log.Info("stopping the job as unpaid", "job", al.lease.JobID, "renter", al.lease.Renter, "why", a.Message())
				unpaid, w = true, stop()
				break loop
			case sched.StopAtEnd:
				w = stop()
				break loop
			case sched.Preempt:
				preempted = a.Message()
				_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusPreempting, Error: preempted})
				w = stopIn(a.Notice)
				break loop
			}
		}
	}
	if pj.crashed() {
		return
	}
	// Billing ends at the exit; the outputs are imported after it, before
	// the settlement that names their CID.
	ended := time.Now()
	outputs, outErr := "", error(nil)
	if w.err == nil {
		outputs, outErr = pj.keepOutputs(al, job)
		if outErr != nil {
			pj.log.Warn("job outputs not kept", "job", al.lease.JobID, "err", outErr)
		}
	}
	// Settled once, and recorded ended at once: a provider that restarts
	// after this must not settle the lease a second time. The record keeps
	// the run's last event, for a renter that attaches after the end
	// (serveJob), unless the run ended because this node stops.
	charged := pj.settleAt(al, m, unpaid, ended, outputs)
	final := finalEvent(w.res, w.err, preempted, unpaid, outputs, charged, outErr)
	if final.Type == wire.EventExit && pj.wrongAnswers && final.Output != "" {
		final.Output = fmt.Sprintf("%x", sha256.Sum256([]byte("not the work: "+final.Output)))
	}
	final.Time = time.Now()
	save := func() error { return pj.saveEnded(al.lease.JobID, al.raw, final) }
	keepTail := true
	if pj.stopping.Load() || pj.bg.Err() != nil {
		keepTail = false
		// Stopped because this node stops (Shutdown's preemption, or the
		// node's context): the job did not end, this provider gave it up.
		// A renter that comes back after the restart hears, as before,
		// that it holds no lease, and auctions the job again elsewhere.
		save = func() error { return pj.saveLease(al.lease.JobID, al.raw, LeaseEnded) }
	}
	if err := save(); err != nil {
		pj.log.Warn("lease state not saved", "job", al.lease.JobID, "err", err)
	}
	<-logsDone
	if keepTail {
		// Once all the output is read: the lines written last, maybe
		// while the renter was away, for its attach after the release.
		// Kept as long as the renter may come back: it follows a lease
		// until a minute past its last notice (node/renting's followOnce).
		over := time.Unix(al.lease.End, 0).Add(time.Duration(al.lease.NoticeSec)*time.Second + time.Minute)
		pj.tails.keep(al.lease.JobID, wire.LeaseCID(al.raw), over, tailOf(job.Logs(), endTailBytes, al.logRun), time.Now())
	}
	if preempted != "" && w.err == nil {
		pj.shipCheckpoint(job, send)
	}
	_ = send(final)
}

// finalEvent is the last event of a run that ended with res (err: the
// wait for it failed): preempted with that reason, stopped as unpaid, or
// exited, charged charged, its outputs kept as outputs (outErr: why not).
func finalEvent(res executor.Result, err error, preempted string, unpaid bool, outputs string, charged auction.Credits, outErr error) wire.Event {
	if err != nil {
		return wire.Event{Type: wire.EventError, Error: err.Error()}
	}
	if preempted != "" {
		return wire.Event{Type: wire.EventExit, Status: wire.StatusPreempted, ExitCode: res.ExitCode, Error: preempted, Charged: &charged, Outputs: outputs}
	}
	status := wire.StatusCompleted
	switch {
	case unpaid:
		status = wire.StatusUnpaid
	case res.Stopped:
		status = wire.StatusStopped
	}
	var note string
	var code wire.Code
	if outErr != nil {
		note = OutputsNotKept + outErr.Error()
		if errors.Is(outErr, ErrOutputsTooLarge) {
			code = wire.CodeOutputs
		}
	}
	return wire.Event{Type: wire.EventExit, Status: status, ExitCode: res.ExitCode, PullMS: res.PullDuration.Milliseconds(), Output: res.StdoutSHA256,
		Charged: &charged, Outputs: outputs, Error: note, Code: code}
}

// PullFailed begins the error of a not-started event (wire.StatusNotStarted)
// whose job's image this provider could not pull. The renter counts them
// per image: a reference that no registry has, or that needs credentials,
// fails alike on every provider, which is the renter's fault, not theirs.
const PullFailed = "the image could not be pulled: "

// isPullError: err is the executor's failure to pull the job's image
// (node/executor's ensureImage: "executor: pull <ref>: ...").
func isPullError(err error) bool { return strings.Contains(err.Error(), "executor: pull ") }

// shipCheckpoint sends the job's checkpoint tar in chunks, if it has one
// (its spec names a checkpoint path).
func (pj *Provider) shipCheckpoint(job executor.Job, send func(wire.Event) error) {
	ctx, cancel := context.WithTimeout(pj.bg, 30*time.Second)
	defer cancel()
	rc, err := job.CopyCheckpoint(ctx)
	if errors.Is(err, executor.ErrNoCheckpoint) {
		return
	}
	if err != nil {
		_ = send(wire.Event{Type: wire.EventLog, Log: []byte("gleaner: checkpoint could not be copied: " + err.Error() + "\n")})
		return
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, wire.MaxCheckpoint+1))
	if err != nil || len(data) > wire.MaxCheckpoint {
		_ = send(wire.Event{Type: wire.EventLog, Log: []byte(fmt.Sprintf("gleaner: checkpoint not shipped (over %d bytes or unreadable)\n", wire.MaxCheckpoint))})
		return
	}
	for len(data) > 0 {
		n := min(len(data), 128<<10)
		if send(wire.Event{Type: wire.EventCheckpoint, Log: data[:n]}) != nil {
			return
		}
		data = data[n:]
	}
}

// providedEnv is the GLEANER_ variables this provider gives the job from
// its spec: a shard's index, a gang member's rank and size. The gang's
// peers (auction.EnvGangPeers) are added here too by the gang's network
// forwarding (node/gangnet), once it knows the members' addresses: this
// is the one place the provider sets a gang member's environment.
func providedEnv(spec *auction.JobSpec) map[string]string {
	env := spec.ShardEnv()
	for k, v := range spec.GangEnv() {
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	return env
}

// execSpec turns the lease and the renter's spec into the executor's
// limits. The renter asked for cpus and memory; a spec that names none
// gets one core and 2 GiB per GPU, never unlimited.
func (pj *Provider) execSpec(al *activeLease, spec *auction.JobSpec, secrets map[string]string) executor.Spec {
	inv := pj.p.Availability().Inventory
	egress := pj.p.Settings().Policy.Egress
	es := executor.Spec{
		JobID: pj.execID(al.lease.JobID), LeaseCID: wire.LeaseCID(al.raw), Image: spec.Image, Command: spec.Command, Env: spec.Env, Provided: providedEnv(spec),
		Secrets: executor.Secrets(secrets), CPUs: float64(max(spec.Resources.CPUs, al.lease.GPUs)),
		MemoryMiB: int64(max(spec.Resources.MemoryGB*1000, 2048*al.lease.GPUs)), Pids: 1024,
		Egress: egress && !spec.IsService(), CheckpointPath: spec.Checkpoint.Path,
		OutputPath: spec.Outputs.Path, OutputMiB: int((spec.Outputs.MaxBytes + 1<<20 - 1) >> 20), // rounded up: the spec allows 1MiB..64GiB
	}
	if spec.IsService() {
		// A service job never has egress: its port is reached only
		// through this daemon (executor/service_net.go).
		es.ServicePort = spec.Service.Port
	}
	for _, g := range pj.gpusOf(al.lease.JobID) {
		if g < len(inv.GPUs) {
			es.GPUUUIDs = append(es.GPUUUIDs, inv.GPUs[g].UUID)
			es.SimulatedGPUs = es.SimulatedGPUs || inv.GPUs[g].Simulated
		}
	}
	return es
}

// attach adds a renter's new stream to a running job's followers, sends the
// retained tail of its output, and keeps the stream open until the job ends.
func (pj *Provider) attach(s Stream, al *activeLease) {
	pj.mu.Lock()
	job, m := al.job, al.meter
	pj.mu.Unlock()
	if job == nil {
		pj.attachWaiting(s, al)
		return
	}
	// The retained tail, with the offset it begins at, so the renter
	// keeps only what it has not had.
	if writeTail(s, tailOf(job.Logs(), executor.DefaultLogBytes, al.logRun)) != nil {
		return
	}
	// The run has ended, its lease not released yet (its last event may
	// have gone to the followers already): the renter is told how it
	// ended, not that it runs.
	if final, ok := pj.finalOf(al.lease.JobID, al.raw); ok {
		_ = wire.Write(s, final)
		return
	}
	if err := wire.Write(s, wire.Event{Type: wire.EventStatus, Status: wire.StatusRunning, Time: time.Now()}); err != nil {
		return
	}
	al.hub.add(s)
	defer al.hub.detach(s)
	al.backOnce.Do(func() { close(al.back) })
	// A renter that restarted pays on this stream: its vouchers count as
	// they would have on the one that started the job.
	go m.readVouchers(s, pj.onPaid(al))
	<-al.done
}

// attachWaiting follows a started lease whose job is not running yet (a
// reservation waiting for its window, an image being pulled) on a
// restarted renter's stream: its run sends the rest of the events to it,
// and its vouchers are read once the job runs. A lease this node holds
// but was never started here (restored after this node restarted) is not
// running anything: the renter must start it again.
func (pj *Provider) attachWaiting(s Stream, al *activeLease) {
	if in, ok := pj.sched.Lease(al.lease.JobID, time.Now()); !ok || in.State != sched.Started {
		_ = wire.Write(s, wire.Event{Type: wire.EventError, Code: wire.CodeNotRunning, Error: "the job is not running", Time: time.Now()})
		return
	}
	ev := wire.Event{Type: wire.EventStatus, Status: wire.StatusPulling, Time: time.Now()}
	if start := time.Unix(al.lease.Start, 0); start.After(time.Now()) {
		ev.Status, ev.Error = wire.StatusReserved, "starts "+start.UTC().Format(time.RFC3339)
	}
	if err := wire.Write(s, ev); err != nil {
		return
	}
	al.hub.add(s)
	defer al.hub.detach(s)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		pj.mu.Lock()
		m := al.meter
		pj.mu.Unlock()
		if m != nil {
			go m.readVouchers(s, pj.onPaid(al))
			break
		}
		select {
		case <-al.done:
			return
		case <-pj.bg.Done():
			return // stopping: a lease kept for the next start is never done here
		case <-t.C:
		}
	}
	<-al.done
}

// onPaid tells the scheduler what a lease's best voucher covers.
// A better voucher that pays for another billing interval is kept in the
// lease's record too, so that a provider that crashed settles by it (see
// Restore): an honest renter's every voucher, while a renter sending
// ever so slightly better ones costs a write per interval, not one each.
func (pj *Provider) onPaid(al *activeLease) func(auction.Credits, []byte) {
	var kept time.Duration // what the voucher last kept from this stream covers
	return func(total auction.Credits, voucher []byte) {
		if covers := sched.CoveredBy(al.lease, total); covers > kept {
			if err := pj.saveVoucher(al.lease.JobID, al.raw, voucher); err == nil {
				kept = covers
			} else if !pj.crashed() {
				pj.log.Warn("voucher not kept in the lease's record", "job", al.lease.JobID, "err", err)
			}
		}
		if pj.sched.PaidTotal(al.lease.JobID, total) == nil {
			pj.poke()
		}
	}
}

// samplers signs telemetry for each leased GPU, chained per GPU and echoing
// the renter's nonce; none when the renter sent no nonce.
func (pj *Provider) samplers(al *activeLease, nonce []byte) map[string]*attest.Sampler {
	out := map[string]*attest.Sampler{}
	if len(nonce) == 0 || pj.gpus == nil {
		return out
	}
	inv := pj.p.Availability().Inventory
	cid := wire.LeaseCID(al.raw)
	for _, g := range pj.gpusOf(al.lease.JobID) {
		if g >= len(inv.GPUs) {
			continue
		}
		uuid := inv.GPUs[g].UUID
		if s, err := attest.NewSampler(pj.key, cid, nonce, attest.UUIDHash(uuid)); err == nil {
			out[uuid] = s
		}
	}
	return out
}

// sample reads the GPUs now and signs one sample per leased GPU.
func (pj *Provider) sample(samplers map[string]*attest.Sampler) [][]byte {
	if len(samplers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(pj.bg, 2*time.Second)
	defer cancel()
	inv, err := pj.gpus.Inventory(ctx)
	if err != nil {
		return nil
	}
	var out [][]byte
	for _, g := range inv.GPUs {
		if s, ok := samplers[g.UUID]; ok {
			if _, raw, err := s.Sign(g, time.Now()); err == nil {
				out = append(out, raw)
			}
		}
	}
	return out
}

// settle journals the provider's settlement of a lease (ledger.Settlement):
// the best voucher the renter signed, its exact total, and what of it the
// provider charges: the cost of the scheduler's billed running time, to
// the second (paused time excluded), capped by that voucher; the rest is
// refunded. It returns the charge, which the exit event tells the renter.
func (pj *Provider) settle(al *activeLease, m *meter, unpaid bool) auction.Credits {
	return pj.settleAt(al, m, unpaid, time.Now(), "")
}

// settleAt settles the run as billed up to at, naming its outputs.
func (pj *Provider) settleAt(al *activeLease, m *meter, unpaid bool, at time.Time, outputs string) auction.Credits {
	var total auction.Credits
	var best []byte
	var ran time.Duration
	if m != nil { // nil: the job never ran
		total, best = m.settled()
		if in, ok := pj.sched.Lease(al.lease.JobID, at); ok {
			ran = in.Ran
		} else {
			// Settled before release, so the scheduler still holds it;
			// if not, charge what the renter authorised, as before refunds.
			pj.log.Warn("settling a lease the scheduler does not hold: charging the whole voucher", "job", al.lease.JobID)
			ran = time.Duration(1<<63 - 1)
		}
	}
	return pj.settleRun(al, total, best, ran, unpaid, outputs)
}

// settleRun journals the settlement of a run of ran by the best voucher
// best (its total total; none: nothing is charged).
func (pj *Provider) settleRun(al *activeLease, total auction.Credits, best []byte, ran time.Duration, unpaid bool, outputs string) auction.Credits {
	charged, refund := sched.Charge(al.lease, ran, total)
	payload, err := json.Marshal(ledger.Settlement{Lease: wire.LeaseCID(al.raw), Renter: al.lease.Renter, Total: total, Voucher: best, Unpaid: unpaid,
		Charged: &charged, Refund: refund, Outputs: outputs})
	if err == nil {
		pj.record(ledger.TypeSettlement, payload)
	}
	return charged
}
