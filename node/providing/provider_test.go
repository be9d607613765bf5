package providing

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
)

// The provider's side of a batch rental, on its own: the fakes of
// fakes_test.go stand for Docker, bbolt, the offer publisher and libp2p,
// and each test runs in a synctest bubble, so a notice or a grace passes
// in virtual time and "nothing more happens" is synctest.Wait.

// A quote, an award, a start: the container runs on the GPU the bid
// named, its output and its exit reach the renter, and the lease is
// settled, recorded ended and released, and its container removed.
func TestAwardStartRunComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		rt := r.renter()
		sp := spec("complete", auction.Silver)
		raw := rt.lease("job-1", sp)
		if st, _ := r.pj.LeaseState("job-1"); st != LeaseAwarded || !r.pj.Holds("job-1") {
			t.Fatalf("after the award: state %q, held %v", st, r.pj.Holds("job-1"))
		}

		f := rt.start(raw, sp)
		defer f.close()
		job := <-r.exec.started
		if job.spec.Image != "example.org/job:1" || len(job.spec.GPUUUIDs) != 1 || job.spec.GPUUUIDs[0] != "GPU-0" {
			t.Fatalf("the container's spec: image %q, GPUs %v", job.spec.Image, job.spec.GPUUUIDs)
		}
		f.until(t, "running", isStatus(wire.StatusRunning))
		if st, _ := r.pj.LeaseState("job-1"); st != LeaseLaunched {
			t.Fatalf("while it runs: state %q, want %q", st, LeaseLaunched)
		}
		_, _ = job.logs.Write([]byte("hello from the job\n"))
		if ev := f.until(t, "its output", isType(wire.EventLog)); string(ev.Log) != "hello from the job\n" || ev.Offset == nil || *ev.Offset != 0 {
			t.Fatalf("log event %q at %v", ev.Log, ev.Offset)
		}
		job.exit(0, false)

		ev := f.until(t, "the exit", isType(wire.EventExit))
		if ev.Status != wire.StatusCompleted || ev.ExitCode != 0 || ev.Charged == nil {
			t.Fatalf("exit %+v, want completed with code 0 and a charge", ev)
		}
		synctest.Wait()
		if st, _ := r.pj.LeaseState("job-1"); st != LeaseEnded || r.pj.Holds("job-1") {
			t.Fatalf("after the exit: state %q, held %v", st, r.pj.Holds("job-1"))
		}
		if !job.wasRemoved() {
			t.Fatal("the container was not removed")
		}
		if s := r.settlements(); len(s) != 1 || s[0].Lease != wire.LeaseCID(raw) || s[0].Unpaid {
			t.Fatalf("settlements %+v, want one of the lease", s)
		}
		// The GPU is free again: another job is quoted and awarded on it.
		r.renter().lease("job-2", spec("next", auction.Silver))
	})
}

// A start while its container is launching (it began, but is not the
// lease's job yet), then a clean stop: Shutdown waits for the launch and
// stops the container with the lease's notice all the same; the renter
// hears it was preempted, and Shutdown returns once the run has ended.
func TestShutdownStopsAJobStillLaunching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		launched, release := make(chan string, 1), make(chan struct{})
		r.pj.SetLaunchHook(func(jobID string) {
			launched <- jobID
			<-release
		})
		rt := r.renter()
		sp := spec("launching", auction.Silver)
		f := rt.start(rt.lease("job-1", sp), sp)
		defer f.close()
		job := <-r.exec.started
		<-launched // its container runs; the run has not made it the lease's

		stopped := make(chan error, 1)
		go func() { stopped <- r.pj.Shutdown(context.Background()) }()
		synctest.Wait() // Shutdown has begun, and waits for the launch
		select {
		case err := <-stopped:
			t.Fatalf("Shutdown returned (%v) with a job launching", err)
		default:
		}
		if reply := r.pj.quote(wire.QuoteRequest{JobID: "late", Spec: spec("late", auction.Silver)}, "a renter"); reply.Decline != errStopping.Error() {
			t.Fatalf("a quote while stopping: %+v", reply)
		}
		close(release)

		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if !job.wasStopped() {
			t.Fatal("Shutdown returned and the container that was launching was never stopped")
		}
		if job.notice != 30*time.Second {
			t.Fatalf("stopped with %v of notice, want the lease's 30s", job.notice)
		}
		ev := f.until(t, "the exit", isType(wire.EventExit))
		if ev.Status != wire.StatusPreempted {
			t.Fatalf("exit %+v, want preempted", ev)
		}
	})
}

// A clean stop while the image is still being pulled: the start is
// called off, nothing ran, and the lease is kept for the next start
// (Restore), unsettled.
func TestShutdownCallsOffAPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		r.exec.hold = make(chan struct{}) // never: a pull that does not end
		rt := r.renter()
		sp := spec("pulling", auction.Silver)
		f := rt.start(rt.lease("job-1", sp), sp)
		defer f.close()
		f.until(t, "pulling", isStatus(wire.StatusPulling))
		if err := r.pj.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st, _ := r.pj.LeaseState("job-1"); st != LeaseStarted {
			t.Fatalf("state %q after a stop during the pull, want %q (kept for Restore)", st, LeaseStarted)
		}
		if s := r.settlements(); len(s) != 0 {
			t.Fatalf("settled %+v: a kept lease is settled by the next run", s)
		}
	})
}

// A silver award that needs the GPU a bronze job runs on preempts it:
// the bronze renter is told it is being preempted and then that it was,
// its container gets the lease's notice, and the silver job starts on
// the GPU once it is free.
func TestHigherTierPreemptsBronze(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		low := r.renter()
		bsp := spec("bronze", auction.Bronze)
		bf := low.start(low.lease("bronze-1", bsp), bsp)
		defer bf.close()
		bronze := <-r.exec.started
		bf.until(t, "running", isStatus(wire.StatusRunning))

		high := r.renter()
		ssp := spec("silver", auction.Silver)
		sraw := high.lease("silver-1", ssp)

		ev := bf.until(t, "the preemption's notice", isStatus(wire.StatusPreempting))
		if ev.Type != wire.EventStatus || ev.Error == "" {
			t.Fatalf("preempting event %+v: it says why", ev)
		}
		exit := bf.until(t, "the exit", isType(wire.EventExit))
		if exit.Status != wire.StatusPreempted || exit.Charged == nil {
			t.Fatalf("bronze exit %+v, want preempted with a charge", exit)
		}
		if !bronze.wasStopped() || bronze.notice != 30*time.Second {
			t.Fatalf("bronze stopped %v with notice %v, want the lease's 30s", bronze.wasStopped(), bronze.notice)
		}

		sf := high.start(sraw, ssp)
		defer sf.close()
		silver := <-r.exec.started
		if silver.spec.GPUUUIDs[0] != "GPU-0" {
			t.Fatalf("silver runs on %v", silver.spec.GPUUUIDs)
		}
		sf.until(t, "running", isStatus(wire.StatusRunning))
		silver.exit(0, false)
		sf.until(t, "the exit", isType(wire.EventExit))
	})
}

// A newcomer's award that is not started within its grace is displaced
// by another renter's award for its GPU; its start is then refused with
// the typed code the renter decides by (it auctions the job again,
// nobody failed), not with words.
func TestDisplacedAwardIsRefusedWithItsCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		slow := r.renter()
		sp := spec("slow", auction.Silver)
		raw := slow.lease("slow-1", sp)
		time.Sleep(sched.DefaultNewcomerGrace + time.Second) // virtual: the grace passes unstarted
		r.renter().lease("quick-1", spec("quick", auction.Silver))

		f := slow.start(raw, sp)
		defer f.close()
		ev := f.until(t, "the refusal", isType(wire.EventError))
		if ev.Code != wire.CodeDisplaced {
			t.Fatalf("start of a displaced award: %+v, want code %q", ev, wire.CodeDisplaced)
		}
		if st, _ := r.pj.LeaseState("slow-1"); st != LeaseExpired {
			t.Fatalf("displaced award's state %q, want %q", st, LeaseExpired)
		}
	})
}

// An image that cannot be pulled: the renter is told the job did not
// start, with the pull code (the renter counts those per image, as its
// own fault), and the lease ends settled for nothing.
func TestPullFailureGivesThePullCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		r.exec.startErr = errors.New("executor: pull example.org/job:1: manifest unknown")
		rt := r.renter()
		sp := spec("nopull", auction.Silver)
		raw := rt.lease("job-1", sp)
		f := rt.start(raw, sp)
		defer f.close()
		ev := f.until(t, "the error", isType(wire.EventError))
		if ev.Status != wire.StatusNotStarted || ev.Code != wire.CodePull {
			t.Fatalf("event %+v, want not-started with code %q", ev, wire.CodePull)
		}
		synctest.Wait()
		if st, _ := r.pj.LeaseState("job-1"); st != LeaseEnded || r.pj.Holds("job-1") {
			t.Fatalf("after the failed pull: state %q, held %v", st, r.pj.Holds("job-1"))
		}
		s := r.settlements()
		if len(s) != 1 || s[0].Charged == nil || *s[0].Charged != 0 {
			t.Fatalf("settlements %+v, want one charging nothing", s)
		}
	})
}

// Any other start failure has the start code, not the pull code.
func TestStartFailureGivesTheStartCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		r.exec.startErr = errors.New("executor: create: no space left on device")
		rt := r.renter()
		sp := spec("nostart", auction.Silver)
		f := rt.start(rt.lease("job-1", sp), sp)
		defer f.close()
		if ev := f.until(t, "the error", isType(wire.EventError)); ev.Code != wire.CodeStart {
			t.Fatalf("event %+v, want code %q", ev, wire.CodeStart)
		}
	})
}

// orphan is a provider that crashed while job ran (its lease recorded
// launched, its container running on), started again over the same
// store and executor: Restore adopts the container.
func orphan(t *testing.T, job string) (*rig, *renter, []byte, *fakeJob) {
	t.Helper()
	first := newRig(t, 1)
	rt := first.renter()
	raw := rt.lease(job, spec(job, auction.Silver))
	first.stop()
	if err := first.store.Update(func(tx Tx) error {
		return tx.Put(job, Record{Lease: raw, State: LeaseLaunched, Updated: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	j := newFakeJob(executor.Spec{JobID: first.pj.execID(job), Image: "example.org/job:1"}, time.Now())
	first.exec.orphans[j.ID()] = j

	again := newRigOver(t, 1, first.key, first.store, first.exec)
	rt.r = again
	restored, err := again.pj.Restore(time.Now())
	if err != nil || len(restored.Adopted) != 1 || restored.Adopted[0] != job {
		t.Fatalf("restored %+v, %v; want %s adopted", restored, err, job)
	}
	return again, rt, raw, j
}

// An adopted orphan whose renter never comes back is stopped as unpaid
// once the lease's grace has passed, not left holding the GPU until the
// billing gives up on it; its lease is settled as unpaid and freed.
func TestAdoptedOrphanWithoutItsRenterIsStoppedWithinItsGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, raw, job := orphan(t, "orphan-1")
		defer r.stop()
		l, _, _ := auction.ReadLease(raw)
		grace := sched.Grace(l)

		time.Sleep(grace - time.Second)
		synctest.Wait()
		if job.wasStopped() {
			t.Fatalf("stopped before its grace of %v", grace)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !job.wasStopped() {
			t.Fatalf("an adopted job whose renter never came back still runs %v after the restart (grace %v)", grace+time.Second, grace)
		}
		if st, _ := r.pj.LeaseState("orphan-1"); st != LeaseEnded || r.pj.Holds("orphan-1") {
			t.Fatalf("state %q, held %v", st, r.pj.Holds("orphan-1"))
		}
		if s := r.settlements(); len(s) != 1 || !s[0].Unpaid {
			t.Fatalf("settlements %+v, want one, unpaid", s)
		}
	})
}

// One whose renter attaches again runs on past the grace.
func TestAdoptedOrphanWhoseRenterCameBackRunsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, rt, raw, job := orphan(t, "orphan-1")
		defer r.stop()
		l, _, _ := auction.ReadLease(raw)
		f := rt.request(wire.JobRequest{Kind: "attach", Lease: raw})
		defer f.close()
		f.until(t, "running", isStatus(wire.StatusRunning))
		time.Sleep(2 * sched.Grace(l))
		synctest.Wait()
		if job.wasStopped() {
			t.Fatal("an adopted job whose renter came back was stopped")
		}
		job.exit(0, false)
		if ev := f.until(t, "the exit", isType(wire.EventExit)); ev.Status != wire.StatusCompleted {
			t.Fatalf("exit %+v", ev)
		}
	})
}
