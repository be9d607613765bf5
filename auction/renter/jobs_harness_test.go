package renter

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/provider"
)

// A virtual-time harness for whole jobs: the renter's loop as node runs it
// (Place, start or attach, follow while paying, decide with the Lifecycle,
// write what it decided to a journal, again), over fake providers that
// quote and award with real signed bids (fake_test.go) and run each job as
// a script says, on a manual clock (harness_test.go). A renter restart is
// its context ending at a chosen virtual time and a new loop rebuilt from
// the journal alone, as node's is from its store. No sleeps: a day of
// re-auctions takes milliseconds.

// runKind is how a fake provider's run of a job ends.
type runKind uint8

const (
	runCompletes   runKind = iota // exits 0 after the script's after
	runPreempts                   // preempted after after, shipping ckpt; the GPU is busy for busy
	runLost                       // the provider leaves the network after after
	runPullFails                  // never starts: the image cannot be pulled
	runStartFails                 // never starts: the container would not start
	runRetryExit                  // exits with a code the spec retries
	runOvercharges                // completes, but charges every voucher for a shorter run
)

// runScript is what a provider does with one run it starts.
type runScript struct {
	kind  runKind
	after time.Duration
	ckpt  []byte
	busy  time.Duration
	// unpaidAfter: the renter's vouchers stop reaching the provider after
	// this many (0: they all arrive); the provider pauses the job once they
	// no longer cover it and stops it, unpaid, after its patience.
	unpaidAfter uint64
}

// pullTime is how long a provider takes to find it cannot start a job.
const pullTime = 3 * time.Second

// liveRun is a job's run on a provider, from its start to its end.
type liveRun struct {
	job      string
	provider *fakeProvider
	lease    *auction.Lease
	script   runScript
	began    time.Time // when the renter sent the start: its charge bound counts from here
	ends     time.Time
	vouchers uint64
	paid     auction.Credits // the best voucher the provider received
	// cancelled: the renter cancelled it, which ended it at once (ends);
	// wake interrupts the follower's wait. Both guarded by fakeRuns.mu,
	// as ends is once the run is live.
	cancelled bool
	wake      context.CancelFunc
}

// settlement is a run's charge, as the provider reported it, and the
// renter's verdict on it.
type settlement struct {
	charged, paid, bound auction.Credits
	check                ChargeCheck
}

// fakeRuns is the job protocol of a market's fake providers: start,
// attach, cancel and the vouchers (Pay), each run following its script.
type fakeRuns struct {
	t     testing.TB
	m     *market
	clock *manualClock

	mu      sync.Mutex // guards what follows
	scripts map[string][]runScript
	live    map[string]*liveRun // job -> its run the renter has not seen end
	shipped []shippedRec        // every checkpoint a run shipped back, in order
	starts  []startRec
	leases  []*auction.Lease // each start's
	charges []settlement
	twice   []string // every start of a job while another run of it was live
}

type shippedRec struct {
	at   time.Time // when the renter learnt of it
	ckpt []byte
}

// shippedBefore is the latest checkpoint shipped back by at.
func (f *fakeRuns) shippedBefore(at time.Time) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var c []byte
	for _, s := range f.shipped {
		if !s.at.After(at) {
			c = s.ckpt
		}
	}
	return c
}

type startRec struct {
	job, provider string
	ckpt          []byte
	at            time.Time
}

func newFakeRuns(t testing.TB, m *market, clock *manualClock) *fakeRuns {
	return &fakeRuns{t: t, m: m, clock: clock, scripts: map[string][]runScript{}, live: map[string]*liveRun{}}
}

// script queues what p does with the next runs it starts; once they are
// used up, a run completes after 20 minutes.
func (f *fakeRuns) script(p *fakeProvider, s ...runScript) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[p.id] = append(f.scripts[p.id], s...)
}

func (f *fakeRuns) next(provider string) runScript {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.scripts[provider]
	if len(q) == 0 {
		return runScript{kind: runCompletes, after: 20 * time.Minute}
	}
	f.scripts[provider] = q[1:]
	return q[0]
}

// start sends the job's start, with the checkpoint to resume from, to the
// lease's provider, and follows the run to its end (follow).
func (f *fakeRuns) start(ctx context.Context, l *auction.Lease, ckpt []byte) (RunEnd, *settlement, error) {
	p := f.m.net.providers[l.Provider]
	if p == nil {
		return RunEnd{End: EndLost, Provider: l.Provider, Why: "cannot reach the provider"}, nil, nil
	}
	now := f.clock.Now()
	s := f.next(p.id)
	f.mu.Lock()
	if other := f.live[l.JobID]; other != nil && now.Before(other.ends) {
		f.twice = append(f.twice, fmt.Sprintf("%s started on %s at %v while its run on %s runs to %v", l.JobID, p.id, now, other.provider.id, other.ends))
	}
	f.starts = append(f.starts, startRec{job: l.JobID, provider: p.id, ckpt: ckpt, at: now})
	f.leases = append(f.leases, l)
	f.mu.Unlock()
	switch s.kind {
	case runPullFails, runStartFails:
		if err := f.clock.Sleep(ctx, pullTime); err != nil {
			return RunEnd{}, nil, err
		}
		p.release(l.JobID)
		f.mu.Lock()
		f.charges = append(f.charges, settlement{})
		f.mu.Unlock()
		if s.kind == runPullFails {
			return RunEnd{End: EndNotStarted, Cause: StartPull, Provider: p.id, Why: "provider: the image could not be pulled: manifest unknown"}, &settlement{}, nil
		}
		return RunEnd{End: EndNotStarted, Cause: StartOther, Provider: p.id, Why: "provider: the container would not start"}, &settlement{}, nil
	}
	run := &liveRun{job: l.JobID, provider: p, lease: l, script: s, began: now, ends: now.Add(s.after)}
	if s.unpaidAfter > 0 {
		// Paid up to there, paused a grace later, stopped a patience after.
		run.ends = now.Add(time.Duration(s.unpaidAfter)*time.Duration(l.BillingSec)*time.Second + provider.Grace(l) + provider.Patience(l))
	}
	f.mu.Lock()
	f.live[l.JobID] = run
	f.mu.Unlock()
	return f.follow(ctx, run)
}

// attach follows, after the renter restarted, the run its lease names; a
// provider that no longer holds it (or is gone) lost it.
func (f *fakeRuns) attach(ctx context.Context, l *auction.Lease) (RunEnd, *settlement, error) {
	f.mu.Lock()
	run := f.live[l.JobID]
	f.mu.Unlock()
	if run == nil || run.provider.id != l.Provider || f.m.net.providers[l.Provider] == nil {
		return RunEnd{End: EndLost, Provider: l.Provider, Why: "the provider no longer holds the lease"}, nil, nil
	}
	return f.follow(ctx, run)
}

// cancel is the renter's cancel of job: its live run ends now, charged
// for what ran, and its follower learns so at once.
func (f *fakeRuns) cancel(job string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.live[job]
	if run == nil {
		return
	}
	run.cancelled, run.ends = true, f.clock.Now()
	if run.wake != nil {
		run.wake()
	}
}

// follow pays the run's vouchers as Pacing says, one interval ahead, and
// waits for its end; ctx ending (the renter stopping) leaves the run to go
// on at the provider, for an attach. At the end the provider releases the
// GPUs and settles, and the renter checks the charge.
func (f *fakeRuns) follow(ctx context.Context, run *liveRun) (RunEnd, *settlement, error) {
	l, pace := run.lease, PacingOf(run.lease)
	for {
		now := f.clock.Now()
		f.mu.Lock()
		ends := run.ends
		f.mu.Unlock()
		if !now.Before(ends) {
			break
		}
		if due := uint64(now.Sub(pace.Start)/pace.Interval) + 1; !now.Before(pace.Start) && due > run.vouchers {
			if run.script.unpaidAfter == 0 || due <= run.script.unpaidAfter {
				run.vouchers, run.paid = due, pace.Total(due)
			}
		}
		next := earlier(ends, pace.Start.Add(time.Duration(run.vouchers)*pace.Interval))
		if !next.After(now) {
			next = earlier(ends, now.Add(pace.Interval))
		}
		wctx, wake := context.WithCancel(ctx)
		f.mu.Lock()
		run.wake = wake
		f.mu.Unlock()
		err := f.clock.Sleep(wctx, next.Sub(now))
		wake()
		if ctx.Err() != nil {
			return RunEnd{}, nil, ctx.Err()
		}
		_ = err // woken by a cancel: the loop reads the new end
	}
	p, s := run.provider, run.script
	p.release(run.job)
	f.mu.Lock()
	delete(f.live, run.job) // no cancel reaches it from here: its end is settled
	f.mu.Unlock()
	ran := run.ends.Sub(run.began)
	charged, _ := provider.Charge(l, ran, run.paid)
	end := RunEnd{Provider: p.id}
	switch {
	case run.cancelled:
		end.End, end.Why = EndCancelled, "cancelled by the renter"
	case s.unpaidAfter > 0:
		ran = time.Duration(s.unpaidAfter)*pace.Interval + provider.Grace(l) // a paused job is not billed
		charged, _ = provider.Charge(l, ran, run.paid)
		end.End, end.Why = EndFailed, "the provider stopped the job unpaid"
	case s.kind == runCompletes:
		end.End = EndCompleted
	case s.kind == runOvercharges:
		end.End, charged = EndCompleted, run.paid
	case s.kind == runRetryExit:
		end.End, end.Why = EndRetryExit, "exit code 75 asks for a retry"
	case s.kind == runPreempts:
		end.End, end.Why, end.Checkpoint = EndPreempted, "preempted: a silver job", s.ckpt
		p.mu.Lock()
		p.busyUntil = run.ends.Add(s.busy)
		p.mu.Unlock()
		if len(s.ckpt) > 0 {
			f.mu.Lock()
			f.shipped = append(f.shipped, shippedRec{at: f.clock.Now(), ckpt: s.ckpt})
			f.mu.Unlock()
		}
	case s.kind == runLost:
		delete(f.m.net.providers, p.id)
		return RunEnd{End: EndLost, Provider: p.id, Why: "lost the provider"}, nil, nil
	}
	set := &settlement{charged: charged, paid: run.paid, bound: ChargeBound(l, run.began, run.ends, run.paid)}
	set.check = CheckCharge(set.charged, set.paid, set.bound)
	f.mu.Lock()
	f.charges = append(f.charges, *set)
	f.mu.Unlock()
	return end, set, nil
}

// journal is what the renter's store keeps of one job: node's JobRecord
// (state, lease, lifecycle snapshot) and its checkpoint bucket.
type journal struct {
	state   string // "auction", "leased" or "ended"
	life    Snapshot
	lease   *auction.Lease // while leased
	ckpt    []byte
	outcome Step
}

// jobHarness is one renter's job in a fake market.
type jobHarness struct {
	t     testing.TB
	clock *manualClock
	m     *market
	runs  *fakeRuns
	a     *Auctioneer
	spec  *auction.JobSpec
	req   Request
	j     journal

	// What the loop saw, for the properties.
	runsSeen  int
	leased    []string // providers, in order
	excluded  []string // a preemptor found in Exclude right after its preemption
	restarted int
	last      *settlement

	cancelAfter time.Duration // the renter cancels the job then (0: never)
}

func newJobHarness(t testing.TB, clock *manualClock, spec *auction.JobSpec, gpus int, floors ...auction.Credits) *jobHarness {
	m := newMarket(t, clock, gpus, floors...)
	h := &jobHarness{t: t, clock: clock, m: m, runs: newFakeRuns(t, m, clock), spec: spec, req: request(t, "job-1", spec)}
	h.a = m.auctioneer(t)
	h.j = journal{state: "auction"}
	return h
}

// maxSteps bounds the runs of one job: every path ends well within it.
const maxSteps = MaxPreemptions + MaxNotStarted + 20

// loop is node's run loop in miniature, from life (and, when attach is
// set, the lease it follows first): it returns when the job has an
// outcome (in the journal) or ctx ends (the renter stopping).
func (h *jobHarness) loop(ctx context.Context, life *Lifecycle, attach *auction.Lease) {
	for {
		var (
			lease *auction.Lease
			end   RunEnd
			set   *settlement
			err   error
		)
		if attach != nil {
			lease, attach = attach, nil
			end, set, err = h.runs.attach(ctx, lease)
		} else {
			req := h.req
			req.Exclude, req.LastResort = life.Exclude(), life.LastResort()
			res, perr := h.a.Place(ctx, req, life.Policy())
			if ctx.Err() != nil {
				return
			}
			if perr != nil {
				h.j = journal{state: "ended", outcome: life.Unplaced(res, perr)}
				return
			}
			life.Placed(res)
			lease = res.Lease
			h.leased = append(h.leased, lease.Provider)
			h.j.state, h.j.lease, h.j.life = "leased", lease, life.Snapshot()
			end, set, err = h.runs.start(ctx, lease, life.Checkpoint())
		}
		if err != nil {
			return // stopping: the run goes on at the provider, the journal says leased
		}
		h.runsSeen++
		if h.runsSeen > maxSteps {
			h.t.Errorf("no outcome after %d runs", h.runsSeen)
			h.j = journal{state: "ended"}
			return
		}
		h.last = set
		st := life.Ended(end)
		if end.End == EndPreempted && life.Exclude()[end.Provider] {
			h.excluded = append(h.excluded, end.Provider)
		}
		if st.Done {
			h.j = journal{state: "ended", outcome: st}
			return
		}
		// The checkpoint before the record, as node's waitAgain.
		h.j.ckpt = life.Checkpoint()
		h.j.state, h.j.lease, h.j.life = "auction", nil, life.Snapshot()
	}
}

// run drives the job to its outcome in virtual time, the renter stopping
// at each of crashes (virtual times from the start) and starting again
// from its journal.
func (h *jobHarness) run(t *testing.T, crashes ...time.Duration) Step {
	drive(t, h.clock, func() {
		if h.cancelAfter > 0 {
			stop, done := context.WithCancel(context.Background())
			defer done()
			go func() {
				if h.clock.Sleep(stop, h.cancelAfter) == nil {
					h.runs.cancel(h.req.JobID)
				}
			}()
		}
		life := NewLifecycle(h.spec, "")
		var attach *auction.Lease
		start := h.clock.Now()
		for i := 0; ; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			if i < len(crashes) {
				at := start.Add(crashes[i])
				go func() {
					if h.clock.Sleep(ctx, at.Sub(h.clock.Now())) == nil {
						cancel()
					}
				}()
			}
			h.loop(ctx, life, attach)
			cancel()
			if h.j.state == "ended" {
				return
			}
			// Restarted: everything in memory is gone but the journal.
			h.restarted++
			life = Restore(h.spec, "", h.j.life, h.j.ckpt)
			attach = nil
			if h.j.state == "leased" {
				attach = h.j.lease
			}
		}
	})
	return h.j.outcome
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
