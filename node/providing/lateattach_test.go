package providing

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/wire"
)

// ranAlone runs job to its exit with code while its renter's stream is
// gone (the renter lost the provider, a relay died): the run ends, is
// settled and released with nobody following it.
func ranAlone(t *testing.T, r *rig, rt *renter, job string, code int) []byte {
	t.Helper()
	sp := spec(job, auction.Silver)
	raw := rt.lease(job, sp)
	f := rt.start(raw, sp)
	j := <-r.exec.started
	f.until(t, "running", isStatus(wire.StatusRunning))
	f.close()
	synctest.Wait()
	j.exit(code, false)
	synctest.Wait()
	if st, _ := r.pj.LeaseState(job); st != LeaseEnded || r.pj.Holds(job) {
		t.Fatalf("after the exit: state %q, held %v", st, r.pj.Holds(job))
	}
	return raw
}

// A renter that lost the provider while its job ran, and attaches again
// after the job's end, is told how the run ended (its exit code, its
// charge), not that the provider holds no lease: it ends the job as it
// really ended, not as the provider's failure.
func TestAttachAfterTheEndGetsTheRunsExit(t *testing.T) {
	for _, code := range []int{0, 3} {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1)
			defer r.stop()
			rt := r.renter()
			raw := ranAlone(t, r, rt, "late-1", code)

			f := rt.request(wire.JobRequest{Kind: "attach", Lease: raw})
			defer f.close()
			ev := f.end()
			if ev.Type != wire.EventExit || ev.Status != wire.StatusCompleted || ev.ExitCode != code || ev.Charged == nil || ev.Time.IsZero() {
				t.Fatalf("attach after the end: %+v, want the exit with code %d and a charge", ev, code)
			}
			s := r.settlements()
			if len(s) != 1 || *s[0].Charged != *ev.Charged {
				t.Fatalf("settlements %+v; the late exit says charged %d", s, *ev.Charged)
			}
		})
	}
}

// Only the lease's renter hears it; another lease of the job ID (not the
// one that ran) still hears the provider holds none.
func TestAttachAfterTheEndIsTheRentersOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		rt := r.renter()
		raw := ranAlone(t, r, rt, "late-1", 0)

		f := r.renter().request(wire.JobRequest{Kind: "attach", Lease: raw})
		if ev := f.end(); ev.Type != wire.EventError || ev.Status != "" {
			t.Fatalf("a stranger's attach: %+v, want refused", ev)
		}
		f.close()

		other := rt.lease("late-2", spec("late-2", auction.Silver))
		// late-2's lease, sent for late-1's ended run: a lease the record
		// does not hold.
		if err := r.store.Update(func(tx Tx) error {
			var rec Record
			if err := tx.Get("late-1", &rec); err != nil {
				return err
			}
			rec.Lease = other
			return tx.Put("late-1", rec)
		}); err != nil {
			t.Fatal(err)
		}
		f = rt.request(wire.JobRequest{Kind: "attach", Lease: raw})
		defer f.close()
		if ev := f.end(); ev.Type != wire.EventError || ev.Code != wire.CodeNoLease {
			t.Fatalf("an attach of a lease the record does not hold: %+v, want no-lease", ev)
		}
	})
}

// The final event is in the lease's record: a provider started again
// still answers a late attach with it.
func TestAttachAfterTheEndSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newRig(t, 1)
		rt := first.renter()
		raw := ranAlone(t, first, rt, "late-1", 0)
		first.stop()
		synctest.Wait()

		again := newRigOver(t, 1, first.key, first.store, first.exec)
		defer again.stop()
		if _, err := again.pj.Restore(time.Now()); err != nil {
			t.Fatal(err)
		}
		rt.r = again
		f := rt.request(wire.JobRequest{Kind: "attach", Lease: raw})
		defer f.close()
		if ev := f.end(); ev.Type != wire.EventExit || ev.Status != wire.StatusCompleted || ev.ExitCode != 0 || ev.Charged == nil {
			t.Fatalf("attach after the end and a restart: %+v, want the exit", ev)
		}
	})
}

// An attach after the run's end but before its lease is released (the
// run waits for a slow follower to take its last event) is told how it
// ended, not that the job runs.
func TestAttachBeforeTheReleaseGetsTheRunsExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		rt := r.renter()
		sp := spec("late-1", auction.Silver)
		raw := rt.lease("late-1", sp)
		f := rt.start(raw, sp)
		defer f.close()
		j := <-r.exec.started
		f.until(t, "running", isStatus(wire.StatusRunning))

		// A follower that reads up to the job's running, then no more.
		slow, theirs := net.Pipe()
		defer slow.Close()
		go r.pj.serveJob(pipeEnd{theirs}, rt.id)
		go func() { _ = wire.WriteJobRequest(slow, &wire.JobRequest{Kind: "attach", Lease: raw}) }()
		for {
			var ev wire.Event
			if err := wire.Read(slow, wire.MaxEventFrame, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Status == wire.StatusRunning {
				break
			}
		}
		j.exit(0, false)
		f.until(t, "the exit", isType(wire.EventExit))
		synctest.Wait()
		if st, _ := r.pj.LeaseState("late-1"); st != LeaseEnded || !r.pj.Holds("late-1") {
			t.Fatalf("while the slow follower holds the run: state %q, held %v", st, r.pj.Holds("late-1"))
		}

		g := rt.request(wire.JobRequest{Kind: "attach", Lease: raw})
		defer g.close()
		if ev := g.end(); ev.Type != wire.EventExit || ev.Status != wire.StatusCompleted {
			t.Fatalf("attach before the release: %+v, want the exit", ev)
		}
	})
}

// A job this provider stopped because it stops (Shutdown preempts it)
// did not end: a renter that comes back after the restart hears, as
// before, that the provider holds no lease, and auctions it again.
func TestAttachAfterAShutdownIsNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newRig(t, 1)
		rt := first.renter()
		sp := spec("late-1", auction.Silver)
		raw := rt.lease("late-1", sp)
		f := rt.start(raw, sp)
		<-first.exec.started
		f.until(t, "running", isStatus(wire.StatusRunning))
		f.close()
		synctest.Wait()
		if err := first.pj.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		first.stop()
		synctest.Wait()
		if st, _ := first.pj.LeaseState("late-1"); st != LeaseEnded {
			t.Fatalf("after the shutdown: state %q", st)
		}

		again := newRigOver(t, 1, first.key, first.store, first.exec)
		defer again.stop()
		if _, err := again.pj.Restore(time.Now()); err != nil {
			t.Fatal(err)
		}
		rt.r = again
		g := rt.request(wire.JobRequest{Kind: "attach", Lease: raw})
		defer g.close()
		if ev := g.end(); ev.Type != wire.EventError || ev.Code != wire.CodeNoLease {
			t.Fatalf("attach after a shutdown: %+v, want no-lease", ev)
		}
	})
}

// A record an older version wrote (no final event) reads as before.
func TestRecordWithoutAFinalEventReads(t *testing.T) {
	rec, err := ReadRecord([]byte(`{"lease":"AQID","state":"ended","updated":"2026-01-02T03:04:05Z"}`))
	if err != nil || rec.State != LeaseEnded || rec.Final != nil {
		t.Fatalf("%+v, %v", rec, err)
	}
}
