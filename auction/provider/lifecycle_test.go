package provider

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A lease starts once, before its deadline, and not while it is being
// stopped.
func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []Option
		before func(*Scheduler) // after the claim of "j" at t0
		when   time.Duration
		err    error
		launch bool
	}{
		{name: "first start launches", when: time.Second, launch: true},
		{name: "second start", before: func(s *Scheduler) { s.Start("j", t0) }, when: time.Second, err: ErrStarted},
		{name: "at the deadline", when: DefaultStartDeadline, err: ErrExpired},
		{name: "just before the deadline", when: DefaultStartDeadline - time.Nanosecond, launch: true},
		{name: "a configured deadline", opts: []Option{WithStartDeadline(5 * time.Second)}, when: 6 * time.Second, err: ErrExpired},
		{name: "expired by a tick", before: func(s *Scheduler) { s.Tick(at(time.Minute)) }, when: time.Second, err: ErrExpired},
		{name: "expired and released", before: func(s *Scheduler) { s.Tick(at(time.Minute)); s.Release("j", at(time.Minute)) },
			when: time.Second, err: ErrExpired},
		{name: "released", before: func(s *Scheduler) { s.Release("j", t0) }, when: time.Second, err: ErrEnded},
		{name: "preempted before it started", when: time.Second, err: ErrEnding,
			before: func(s *Scheduler) { s.SetAvailability(availability(2, map[int]string{0: "owner"}), t0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.opts...)
			s.SetAvailability(availability(2, nil), t0)
			if _, err := s.Claim(mkLease("j", auction.Bronze, 1, t0, time.Hour), []int{0}, t0); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				tc.before(s)
			}
			acts, err := s.Start("j", at(tc.when))
			if !errors.Is(err, tc.err) {
				t.Fatalf("start: %v, want %v", err, tc.err)
			}
			if got := show(acts) == "launch:j"; got != tc.launch {
				t.Fatalf("launch %v (%q), want %v", got, show(acts), tc.launch)
			}
		})
	}
	if _, err := New().Start("nobody", t0); !errors.Is(err, ErrNoLease) {
		t.Fatalf("start of no lease: %v", err)
	}
}

// Of many concurrent starts of one lease exactly one succeeds.
func TestStartOnceConcurrently(t *testing.T) {
	s := newSched(1)
	mustClaim(t, s, "j", auction.Silver, t0, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, launches := 0, 0
	for range 16 {
		wg.Go(func() {
			acts, err := s.Start("j", at(time.Second))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			}
			launches += len(acts)
		})
	}
	wg.Wait()
	if ok != 1 || launches != 1 {
		t.Fatalf("%d starts succeeded, %d launches; want 1 and 1", ok, launches)
	}
}

// An award not started by its deadline expires once; its GPUs are free
// after Release, and the state stays Expired.
func TestExpire(t *testing.T) {
	s := newSched(1)
	mustClaim(t, s, "j", auction.Silver, t0, 0)
	if acts := s.Tick(at(DefaultStartDeadline - time.Nanosecond)); len(acts) != 0 {
		t.Fatalf("before the deadline: %s", show(acts))
	}
	acts := s.Tick(at(DefaultStartDeadline))
	if show(acts) != "expire:j" {
		t.Fatalf("at the deadline: %q", show(acts))
	}
	if in, _ := s.Lease("j", at(time.Minute)); in.State != Expired {
		t.Fatalf("state %s", in.State)
	}
	if acts := s.Tick(at(time.Hour)); len(acts) != 0 {
		t.Fatalf("expired twice: %s", show(acts))
	}
	if _, err := s.Plan(1, auction.Silver, Span{at(time.Minute), at(time.Hour)}, at(time.Minute)); !errors.Is(err, ErrBusy) {
		t.Fatalf("plan before release: %v (the GPUs are free only once settled)", err)
	}
	s.Release("j", at(time.Minute))
	if st, ok := s.Ended("j"); !ok || st != Expired {
		t.Fatalf("ended as %q %v", st, ok)
	}
	if _, err := s.Plan(1, auction.Silver, Span{at(time.Minute), at(time.Hour)}, at(time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// Release frees the GPUs, ends the lease, and forgets it after the
// retention.
func TestRelease(t *testing.T) {
	s := newSched(2, WithRetention(time.Hour))
	mustClaim(t, s, "j", auction.Silver, t0, 0, 1)
	if !s.DealsWith("renter-j") || s.DealsWith("renter-x") {
		t.Fatal("DealsWith")
	}
	s.Start("j", t0)
	s.Release("j", at(time.Minute))
	if st, ok := s.Ended("j"); !ok || st != Ended {
		t.Fatalf("ended as %q %v", st, ok)
	}
	if _, ok := s.Lease("j", at(time.Minute)); ok || s.DealsWith("renter-j") || len(s.Commitments(at(time.Minute))) != 0 {
		t.Fatal("a released lease is still active")
	}
	if acts := s.Release("j", at(time.Minute)); acts != nil {
		t.Fatal("a second release did something")
	}
	mustClaim(t, s, "k", auction.Silver, at(2*time.Hour), 0)
	s.Release("k", at(2*time.Hour))
	if _, ok := s.Ended("j"); ok {
		t.Fatal("j remembered past the retention")
	}
	if _, ok := s.Ended("k"); !ok {
		t.Fatal("k forgotten at once")
	}
}

// The owner reclaiming a GPU preempts the bronze lease on it, once, and
// never a silver or gold one; the GPU is not planned until it returns.
func TestReclaim(t *testing.T) {
	s := newSched(4)
	mustClaim(t, s, "b", auction.Bronze, t0, 0)
	mustClaim(t, s, "s", auction.Silver, t0, 1)
	mustClaim(t, s, "g", auction.Gold, t0, 2)
	mustClaim(t, s, "b2", auction.Bronze, t0, 3)
	out := map[int]string{0: "the owner's render", 1: "too hot", 2: "busy"}
	acts := s.SetAvailability(availability(4, out), at(time.Minute))
	if len(acts) != 1 || acts[0].JobID != "b" || acts[0].Kind != Preempt || acts[0].Reason != ReasonReclaimed ||
		acts[0].Message() != "the owner reclaimed the GPU: the owner's render" {
		t.Fatalf("reclaim: %+v", acts)
	}
	if acts := s.SetAvailability(availability(4, out), at(2*time.Minute)); len(acts) != 0 {
		t.Fatalf("preempted again: %s", show(acts))
	}
	s.Release("b", at(3*time.Minute))
	if _, err := s.Plan(1, auction.Bronze, Span{at(3 * time.Minute), at(time.Hour)}, at(3*time.Minute)); !errors.Is(err, ErrBusy) {
		t.Fatalf("planned a withdrawn GPU: %v", err)
	}
	if _, err := s.Claim(mkLease("x", auction.Bronze, 1, at(3*time.Minute), time.Hour), []int{0}, at(3*time.Minute)); !errors.Is(err, ErrWithdrawn) {
		t.Fatalf("claimed a withdrawn GPU: %v", err)
	}
	s.SetAvailability(availability(4, nil), at(4*time.Minute))
	if p, err := s.Plan(1, auction.Bronze, Span{at(4 * time.Minute), at(time.Hour)}, at(4*time.Minute)); err != nil || p[0] != 0 {
		t.Fatalf("the returned GPU: %v %v", p, err)
	}
	// A failed inventory read withdraws everything: bronze yields.
	if acts := s.SetAvailability(attestErr("nvml down"), at(5*time.Minute)); show(acts) != "preempt:b2" {
		t.Fatalf("failed read: %q", show(acts))
	}
}

// A bronze lease that outlasts the owner's window is preempted its notice
// before the window closes; one that ends inside the window, and silver,
// are not; outside any window bronze is preempted at once.
func TestWindowEnd(t *testing.T) {
	s := newSched(3)
	s.SetWindows([]auction.Window{{Start: t0.Unix(), End: at(2 * time.Hour).Unix()}}, t0)
	for _, l := range []*auction.Lease{
		mkLease("long", auction.Bronze, 1, t0, 3*time.Hour),
		mkLease("short", auction.Bronze, 1, t0, 2*time.Hour),
		mkLease("silver", auction.Silver, 1, t0, 3*time.Hour),
	} {
		l.Price = 0 // billing is not under test
		if _, err := s.Claim(l, []int{map[string]int{"long": 0, "short": 1, "silver": 2}[l.JobID]}, t0); err != nil {
			t.Fatal(err)
		}
		s.Start(l.JobID, t0)
	}
	notice := at(2*time.Hour - 30*time.Second)
	if acts := s.Tick(notice.Add(-time.Nanosecond)); len(acts) != 0 {
		t.Fatalf("early: %s", show(acts))
	}
	acts := s.Tick(notice)
	if show(acts) != "preempt:long" || acts[0].Reason != ReasonWindowEnd {
		t.Fatalf("at the notice: %+v", acts)
	}
	s.Release("long", notice)
	// Outside every window a bronze award does not start.
	mustClaim(t, s, "late", auction.Bronze, at(3*time.Hour), 0)
	if acts, err := s.Start("late", at(3*time.Hour)); !errors.Is(err, ErrExpired) {
		t.Fatalf("start outside the window: %q, %v", show(acts), err)
	}
	if got := show(s.Tick(at(3 * time.Hour))); got != "stop-at-end:short stop-at-end:silver expire:late" {
		t.Fatalf("outside the window: %q", got)
	}
}

// A bronze award started 10 s before the owner's window closes, inside
// its 30 s notice (its renter was slow to start it), is refused and ends
// at the next tick as an award not started in time: started, it would
// have been preempted at once and run its notice past the window. Found
// by the simulator with a pull of 0 s: a run 2 s past its provider's
// window. Started 40 s before, it launches.
func TestABronzeStartInsideItsNoticeBeforeTheWindowClosesIsRefused(t *testing.T) {
	s := newSched(2)
	s.SetWindows([]auction.Window{{Start: t0.Unix(), End: at(time.Hour).Unix()}}, t0)
	claimed := at(time.Hour - 50*time.Second)
	for i, id := range []string{"late", "timely"} {
		l := mkLease(id, auction.Bronze, 1, claimed, 2*time.Hour)
		l.Price = 0
		if _, err := s.Claim(l, []int{i}, claimed); err != nil {
			t.Fatal(err)
		}
	}
	if acts, err := s.Start("timely", at(time.Hour-40*time.Second)); err != nil || show(acts) != "launch:timely" {
		t.Fatalf("a start with its notice left: %q, %v", show(acts), err)
	}
	started := at(time.Hour - 10*time.Second)
	acts, err := s.Start("late", started)
	if !errors.Is(err, ErrExpired) || len(acts) != 0 {
		t.Fatalf("a start inside the notice: %q, %v; want it refused as expired", show(acts), err)
	}
	// The timely one runs until its notice, 30 s before the close.
	if got := show(s.Tick(started)); got != "expire:late preempt:timely" {
		t.Fatalf("at the next tick: %q, want the refused award expired and the other preempted with its notice", got)
	}
}

// A bronze lease claimed again after the provider's restart (Kept) may
// be running already: started inside its notice before the window
// closes, it starts, and is preempted with its notice, not refused.
func TestALeaseClaimedAgainStartsInsideItsNotice(t *testing.T) {
	s := newSched(1)
	s.SetWindows([]auction.Window{{Start: t0.Unix(), End: at(time.Hour).Unix()}}, t0)
	restarted := at(time.Hour - 10*time.Second)
	l := mkLease("kept", auction.Bronze, 1, t0, 2*time.Hour)
	l.Price = 0
	if _, err := s.Claim(l, []int{0}, restarted, Kept()); err != nil {
		t.Fatal(err)
	}
	acts, err := s.Start("kept", restarted)
	if err != nil {
		t.Fatalf("a lease claimed again was refused: %v", err)
	}
	acts = append(acts, s.Tick(restarted)...)
	if got := show(acts); got != "launch:kept preempt:kept" {
		t.Fatalf("claimed again inside its notice: %q, want it launched and preempted", got)
	}
}

// The lease's end stops it once.
func TestStopAtEnd(t *testing.T) {
	s := newSched(1)
	l := mkLease("j", auction.Silver, 1, t0, time.Hour)
	l.Price = 0
	s.Claim(l, []int{0}, t0)
	s.Start("j", t0)
	s.Running("j", t0)
	if got := show(s.Tick(at(time.Hour))); got != "stop-at-end:j" {
		t.Fatalf("at the end: %q", got)
	}
	if acts := s.Tick(at(2 * time.Hour)); len(acts) != 0 {
		t.Fatalf("stopped twice: %s", show(acts))
	}
}
