package providing

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/executor"
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

// The lines a job writes at its very end, while its renter is away, reach
// the renter that attaches again after the run's end and release: the
// provider keeps the output's tail, with the offsets the renter
// de-duplicates by, so that what it had before and what it hears now
// make the job's output once, in order.
func TestAttachAfterTheEndGetsTheLinesWrittenWhileAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1)
		defer r.stop()
		rt := r.renter()
		sp := spec("late-1", auction.Silver)
		raw := rt.lease("late-1", sp)
		f := rt.start(raw, sp)
		j := <-r.exec.started
		f.until(t, "running", isStatus(wire.StatusRunning))
		_, _ = j.logs.Write([]byte("line 1\n"))
		ev := f.until(t, "the first line", isType(wire.EventLog))
		if ev.Offset == nil || *ev.Offset != 0 || string(ev.Log) != "line 1\n" {
			t.Fatalf("the first line: %+v", ev)
		}
		had := []byte("line 1\n") // what the renter kept before it lost the stream
		f.close()
		synctest.Wait()

		var want strings.Builder
		want.WriteString("line 1\n")
		for i := 2; i <= 5; i++ {
			line := fmt.Sprintf("line %d\n", i)
			_, _ = j.logs.Write([]byte(line))
			want.WriteString(line)
		}
		j.exit(0, false)
		synctest.Wait()
		if st, _ := r.pj.LeaseState("late-1"); st != LeaseEnded || r.pj.Holds("late-1") {
			t.Fatalf("after the exit: state %q, held %v", st, r.pj.Holds("late-1"))
		}

		g := rt.request(wire.JobRequest{Kind: "attach", Lease: raw})
		defer g.close()
		var last wire.Event
		for ev := range g.events {
			switch ev.Type {
			case wire.EventHeartbeat:
				continue
			case wire.EventLog:
				if last.Type == wire.EventExit {
					t.Fatalf("a log event after the exit: %+v", ev)
				}
				if ev.Offset == nil || *ev.Offset > int64(len(had)) {
					t.Fatalf("a log event without its offset, or past what the renter had (%d): %+v", len(had), ev)
				}
				// As the renter keeps it: only what lies past what it had.
				if skip := int64(len(had)) - *ev.Offset; skip < int64(len(ev.Log)) {
					had = append(had, ev.Log[skip:]...)
				}
			}
			last = ev
		}
		if last.Type != wire.EventExit || last.Status != wire.StatusCompleted {
			t.Fatalf("the attach ended with %+v, want the exit", last)
		}
		if string(had) != want.String() {
			t.Fatalf("the renter's output after the late attach is %q, want %q", had, want.String())
		}
	})
}

// The kept tail is bounded (endTailBytes): a job that printed more keeps
// its last bytes, with the offset they begin at.
func TestTheKeptTailIsBounded(t *testing.T) {
	logs := executor.NewLogBuffer(1 << 20)
	big := bytes.Repeat([]byte("0123456789abcdef"), (endTailBytes+4096)/16)
	_, _ = logs.Write(big)
	tail := tailOf(logs, endTailBytes, "run")
	if len(tail.Data) != endTailBytes || tail.Offset != int64(len(big)-endTailBytes) || !bytes.Equal(tail.Data, big[len(big)-endTailBytes:]) {
		t.Fatalf("tail of %d bytes at %d, want the last %d at %d", len(tail.Data), tail.Offset, endTailBytes, len(big)-endTailBytes)
	}
}

// The tails kept are bounded in number (maxEndTails, the oldest dropped
// first) and in time (a lease's last notice and the minute after, when
// no renter follows it any more), and are the lease's only.
func TestTheKeptTailsAreBounded(t *testing.T) {
	var e endTails
	t0 := time.Now()
	for i := range maxEndTails + 5 {
		e.keep(fmt.Sprintf("job-%d", i), "lease", t0.Add(time.Hour), LogTail{Data: []byte("x"), Offset: int64(i)}, t0)
	}
	if len(e.byJob) != maxEndTails || len(e.order) != maxEndTails {
		t.Fatalf("%d tails kept (%d in order), want %d", len(e.byJob), len(e.order), maxEndTails)
	}
	if got := e.of("job-4", "lease", t0); got.Data != nil {
		t.Fatalf("the oldest tails were kept: %+v", got)
	}
	last := fmt.Sprintf("job-%d", maxEndTails+4)
	if got := e.of(last, "lease", t0); got.Offset != maxEndTails+4 || string(got.Data) != "x" {
		t.Fatalf("the newest tail: %+v", got)
	}
	if got := e.of(last, "another lease", t0); got.Data != nil {
		t.Fatalf("another lease's attach got %+v", got)
	}
	if got := e.of(last, "lease", t0.Add(time.Hour)); got.Data != nil {
		t.Fatalf("a tail past its time: %+v", got)
	}
	// Once their time is over, kept tails go at the next keep.
	e.keep("late", "lease", t0.Add(3*time.Hour), LogTail{Data: []byte("y")}, t0.Add(2*time.Hour))
	if len(e.byJob) != 1 || e.of("late", "lease", t0.Add(2*time.Hour)).Data == nil {
		t.Fatalf("%d tails kept after the others' time, want the new one only", len(e.byJob))
	}
}
