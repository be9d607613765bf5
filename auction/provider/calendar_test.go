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
