package provider

import (
	"errors"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Bronze is sold the gap before a reservation: it holds its GPU until the
// reservation starts, is preempted with its notice before then, and the
// reservation launches at its start once it is gone.
func TestBronzeBackfillsTheGapBeforeAReservation(t *testing.T) {
	s := newSched(1)
	start := at(10 * time.Minute)
	if _, err := s.Claim(mkLease("g", auction.Gold, 1, start, time.Hour), []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start("g", at(time.Second)); err != nil {
		t.Fatal(err)
	}
	b := mkLease("b", auction.Bronze, 1, at(2*time.Second), 3*time.Hour)
	if acts, err := s.Claim(b, []int{0}, at(2*time.Second)); err != nil || len(acts) != 0 {
		t.Fatalf("bronze into the gap: %v %v", show(acts), err)
	}
	if h := holders(s, at(5*time.Minute)); len(h[0]) != 2 {
		t.Fatalf("commitments in the gap: %v", h)
	}
	for _, c := range s.Commitments(at(3 * time.Second)) {
		if c.JobID == "b" && !c.Span.End.Equal(start) {
			t.Fatalf("the backfill is committed until %v, want the reservation's start %v", c.Span.End, start)
		}
	}
	if got := show(mustStart(t, s, "b", at(3*time.Second))); got != "launch:b" {
		t.Fatalf("start of the backfill: %q", got)
	}
	notice := 30 * time.Second
	if acts := s.Tick(start.Add(-notice - time.Nanosecond)); len(acts) != 0 {
		t.Fatalf("before the notice: %s", show(acts))
	}
	acts := s.Tick(start.Add(-notice))
	if len(acts) != 1 || acts[0].Kind != Preempt || acts[0].Reason != ReasonReserved || acts[0].Notice != notice {
		t.Fatalf("at the notice: %s %+v, want the backfill preempted for the reservation", show(acts), acts)
	}
	if acts := s.Tick(start); len(acts) != 0 {
		t.Fatalf("the reservation launched while the backfill still runs: %s", show(acts))
	}
	if got := show(s.Release("b", start.Add(-time.Second))); got != "" {
		t.Fatalf("release before the start: %q", got)
	}
	if got := show(s.Tick(start)); got != "launch:g" {
		t.Fatalf("at the start: %q", got)
	}
}

// A gap too short for the notice and MinBackfill is not sold to bronze,
// silver that would cross a reservation is refused, and a reservation is
// never preempted, whatever claims come after it.
func TestTheGapIsSoldOnlyWhenItFits(t *testing.T) {
	s := newSched(1)
	start := at(time.Minute)
	s.Establish("renter-g")
	if _, err := s.Claim(mkLease("g", auction.Gold, 1, start, time.Hour), []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	s.SetNotice(30 * time.Second)
	if _, err := s.Plan(1, auction.Bronze, Span{at(25 * time.Second), at(2 * time.Hour)}, at(25*time.Second)); !errors.Is(err, ErrBusy) {
		t.Fatalf("plan of bronze 35 s before a reservation with 30 s notice: %v, want busy", err)
	}
	if _, err := s.Plan(1, auction.Bronze, Span{at(15 * time.Second), at(2 * time.Hour)}, at(15*time.Second)); err != nil {
		t.Fatalf("plan of bronze 45 s before a reservation with 30 s notice: %v", err)
	}
	late := mkLease("late", auction.Bronze, 1, at(25*time.Second), time.Hour)
	if _, err := s.Claim(late, []int{0}, at(25*time.Second)); !errors.Is(err, ErrRaced) {
		t.Fatalf("bronze claim 35 s before the reservation: %v, want raced", err)
	}
	sv := mkLease("s", auction.Silver, 1, t0, 2*time.Minute)
	if _, err := s.Claim(sv, []int{0}, t0); !errors.Is(err, ErrRaced) {
		t.Fatalf("silver crossing the reservation: %v, want raced", err)
	}
	ok := mkLease("s2", auction.Silver, 1, t0, 50*time.Second)
	if _, err := s.Claim(ok, []int{0}, t0); err != nil {
		t.Fatalf("silver that ends before the reservation: %v", err)
	}
	g2 := mkLease("g2", auction.Gold, 1, at(30*time.Minute), time.Hour)
	if _, err := s.Claim(g2, []int{0}, t0); !errors.Is(err, ErrRaced) {
		t.Fatalf("a second reservation over the first: %v, want raced", err)
	}
}

// A reservation claimed over a running bronze lease lets it run until the
// reservation's start less its notice; releasing the reservation lets it
// run to its own end again.
func TestAReservationOverBronzeWaitsForItsStart(t *testing.T) {
	s := newSched(1)
	mustClaim(t, s, "b", auction.Bronze, t0, 0)
	mustStart(t, s, "b", t0)
	start := at(20 * time.Minute)
	acts, err := s.Claim(mkLease("g", auction.Gold, 1, start, time.Hour), []int{0}, at(time.Minute))
	if err != nil || len(acts) != 0 {
		t.Fatalf("reservation over running bronze: %s %v, want no preemption yet", show(acts), err)
	}
	mustStart(t, s, "g", at(time.Minute))
	if due := s.Due(); !due.Equal(start.Add(-30 * time.Second)) {
		t.Fatalf("due %v, want the reservation's start less the notice", due)
	}
	s.Release("g", at(2*time.Minute))
	if due := s.Due(); !due.Equal(at(time.Hour)) {
		t.Fatalf("due %v after the reservation was released, want the bronze lease's own end", due)
	}
	for _, c := range s.Commitments(at(3 * time.Minute)) {
		if c.JobID == "b" && !c.Span.End.Equal(at(time.Hour)) {
			t.Fatalf("bronze committed until %v after the reservation went, want its end", c.Span.End)
		}
	}
}

// A reservation launches its lead before its start, so that its job runs
// at its start, and is billed from its start, not from the launch.
func TestAReservationLaunchesItsLeadEarly(t *testing.T) {
	s := newSched(1)
	s.SetLaunchLead(2 * time.Second)
	start := at(10 * time.Minute)
	if _, err := s.Claim(mkLease("g", auction.Gold, 1, start, time.Hour), []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	mustStart(t, s, "g", at(time.Second))
	if due := s.Due(); !due.Equal(start.Add(-2 * time.Second)) {
		t.Fatalf("due %v, want the start less the lead", due)
	}
	if acts := s.Tick(start.Add(-2*time.Second - time.Nanosecond)); len(acts) != 0 {
		t.Fatalf("before the lead: %s", show(acts))
	}
	if got := show(s.Tick(start.Add(-2 * time.Second))); got != "launch:g" {
		t.Fatalf("at the lead: %q", got)
	}
	if err := s.Running("g", start.Add(-1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Lease("g", start.Add(time.Second)); in.Ran != time.Second {
		t.Fatalf("billed %v a second after the start, want 1s: the lead is not billed", in.Ran)
	}
	s.Release("g", start.Add(time.Minute))
	s.SetLaunchLead(time.Hour)
	g2 := mkLease("g2", auction.Gold, 1, at(3*time.Hour), time.Hour)
	if _, err := s.Claim(g2, []int{0}, at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	mustStart(t, s, "g2", at(time.Minute))
	if in, _ := s.Lease("g2", at(time.Minute)); in.Launched {
		t.Fatal("launched at once")
	}
	if got := show(s.Tick(at(3*time.Hour - MaxLaunchLead))); got != "launch:g2" {
		t.Fatalf("a lead of an hour is capped at %v: %q", MaxLaunchLead, got)
	}
}

// A backfill awarded but never started gives its GPU back before the
// reservation's notice, so it never holds up the reservation, and one
// started late is refused rather than cut short of its notice.
func TestAnUnstartedBackfillNeverDelaysTheReservation(t *testing.T) {
	s := newSched(1)
	start := at(2 * time.Minute) // notice 30 s: a backfill must start by 1m30s
	if _, err := s.Claim(mkLease("g", auction.Gold, 1, start, time.Hour), []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	mustStart(t, s, "g", t0)
	b := mkLease("b", auction.Bronze, 1, at(70*time.Second), time.Hour)
	if _, err := s.Claim(b, []int{0}, at(70*time.Second)); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Lease("b", at(70*time.Second)); !in.Deadline.Equal(at(90 * time.Second)) {
		t.Fatalf("the backfill must start by %v, want the reservation's start less its notice", in.Deadline)
	}
	if _, err := s.Start("b", at(90*time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("a backfill started as its notice would begin: %v, want expired", err)
	}
	if got := show(s.Tick(at(90 * time.Second))); got != "expire:b" {
		t.Fatalf("at its deadline: %q", got)
	}
	s.Release("b", at(90*time.Second))
	if got := show(s.Tick(start)); got != "launch:g" {
		t.Fatalf("at the reservation's start: %q", got)
	}
}

// With no notice, a silver lease that runs now over a bronze one takes
// its GPU at once: the bronze is preempted, not treated as running into
// a reservation.
func TestSilverOverBronzeWithoutNoticePreemptsAtOnce(t *testing.T) {
	s := newSched(1)
	b := mkLease("b", auction.Bronze, 1, t0, time.Hour)
	b.NoticeSec = 0
	if _, err := s.Claim(b, []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	mustStart(t, s, "b", t0)
	acts, err := s.Claim(mkLease("s", auction.Silver, 1, at(5*time.Second), time.Hour), []int{0}, at(5*time.Second))
	if err != nil || show(acts) != "preempt:b" || acts[0].Reason != ReasonHigherTier {
		t.Fatalf("silver over bronze with no notice: %s %+v %v, want bronze preempted for the higher tier", show(acts), acts, err)
	}
}

// The load a reservation is priced by is the load at its window: a GPU
// busy now with a lease that ends before it counts as free then, and one
// reserved for it counts as held.
func TestLoadAtAReservationsWindow(t *testing.T) {
	s := newSched(2)
	mustClaim(t, s, "now", auction.Silver, t0, 0) // t0..t0+1h
	s.Establish("renter-later")
	if _, err := s.Claim(mkLease("later", auction.Gold, 1, at(3*time.Hour), time.Hour), []int{1}, t0); err != nil {
		t.Fatal(err)
	}
	if u := s.LoadAt(auction.Gold, t0, t0); u != 0.5 {
		t.Fatalf("load now %v, want 0.5", u)
	}
	if u := s.LoadAt(auction.Gold, at(2*time.Hour), t0); u != 0 {
		t.Fatalf("load in two hours %v, want 0: the silver lease has ended, the reservation not begun", u)
	}
	if u := s.LoadAt(auction.Gold, at(3*time.Hour+time.Minute), t0); u != 0.5 {
		t.Fatalf("load in the reservation's window %v, want 0.5", u)
	}
}
