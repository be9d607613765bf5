package provider

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// claimAs is an award of job by renter on gpus at now as node's adapter
// carries it out: Displace, settle and Release what it displaced, then
// Claim. It returns the jobs displaced and the claim's error.
func claimAs(s *Scheduler, job, renter string, now time.Time, gpus ...int) ([]string, error) {
	l := mkLease(job, auction.Silver, len(gpus), now, time.Hour)
	l.Renter = renter
	var gone []string
	for _, a := range s.Displace(l, gpus, now) {
		if a.Kind != Expire || a.Reason != ReasonDisplaced {
			panic(fmt.Sprintf("Displace gave %+v", a))
		}
		gone = append(gone, a.JobID)
		s.Release(a.JobID, now)
	}
	_, err := s.Claim(l, gpus, now)
	return gone, err
}

// The newcomer rule on one GPU: who displaces whom, and when.
func TestNewcomerDisplacement(t *testing.T) {
	const grace = DefaultNewcomerGrace
	for _, tc := range []struct {
		name string
		// first claims "a" at t0 as renter "ra", established if estA;
		// started if started. Then "b" claims as "rb" at after.
		estA, started, estB bool
		after               time.Duration
		displaced           bool
	}{
		{name: "a newcomer's award past its grace, by a newcomer", after: grace, displaced: true},
		{name: "a newcomer's award within its grace, by a newcomer", after: grace - time.Millisecond},
		{name: "a newcomer's award at once, by an established renter", after: time.Millisecond, estB: true, displaced: true},
		{name: "an established renter's unstarted award, by a newcomer", after: 20 * time.Second, estA: true},
		{name: "an established renter's unstarted award, by an established renter", after: 20 * time.Second, estA: true, estB: true},
		{name: "a newcomer's started lease, by an established renter", after: 20 * time.Second, started: true, estB: true},
		{name: "a newcomer's started lease, by a newcomer", after: 20 * time.Second, started: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSched(1)
			if tc.estA {
				s.Establish("ra")
			}
			if tc.estB {
				s.Establish("rb")
			}
			if gone, err := claimAs(s, "a", "ra", t0, 0); err != nil || gone != nil {
				t.Fatalf("first claim: %v %v", gone, err)
			}
			if tc.started {
				mustStart(t, s, "a", at(10*time.Millisecond))
			}
			gone, err := claimAs(s, "b", "rb", at(tc.after), 0)
			if !tc.displaced {
				if !errors.Is(err, ErrRaced) || gone != nil {
					t.Fatalf("claim over a: displaced %v, %v; want it refused as raced", gone, err)
				}
				if h := holders(s, at(tc.after)); !slices.Equal(h[0], []string{"a"}) {
					t.Fatalf("GPU 0 held by %v, want a", h[0])
				}
				return
			}
			if err != nil || !slices.Equal(gone, []string{"a"}) {
				t.Fatalf("claim over a: displaced %v, %v; want a displaced", gone, err)
			}
			if h := holders(s, at(tc.after)); !slices.Equal(h[0], []string{"b"}) {
				t.Fatalf("GPU 0 held by %v, want b", h[0])
			}
			// The displaced award's start is refused, saying why, in the
			// words a renter re-auctions on.
			if _, err := s.Start("a", at(tc.after)); !errors.Is(err, ErrDisplaced) || !strings.HasPrefix(err.Error(), ErrNoLease.Error()) {
				t.Fatalf("start of the displaced award: %v, want %v", err, ErrDisplaced)
			}
			if st, _ := s.Ended("a"); st != Displaced {
				t.Fatalf("a ended as %q, want %q", st, Displaced)
			}
		})
	}
}

// Between Displace and the caller's Release the displaced award still
// holds its GPU (its settlement is not journaled yet), cannot start, and
// keeps any other claim out.
func TestDisplacedAwardHoldsUntilReleased(t *testing.T) {
	s := newSched(1)
	if _, err := claimAs(s, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	now := at(DefaultNewcomerGrace)
	l := mkLease("b", auction.Silver, 1, now, time.Hour)
	acts := s.Displace(l, []int{0}, now)
	if show(acts) != "expire:a" || acts[0].Reason != ReasonDisplaced {
		t.Fatalf("displace: %s %+v", show(acts), acts)
	}
	if _, err := s.Claim(l, []int{0}, now); !errors.Is(err, ErrRaced) {
		t.Fatalf("claim before the displaced award is released: %v, want raced", err)
	}
	if _, err := s.Start("a", now); !errors.Is(err, ErrDisplaced) {
		t.Fatalf("start of the displaced award before its release: %v", err)
	}
	if more := s.Displace(mkLease("c", auction.Silver, 1, now, time.Hour), []int{0}, now); more != nil {
		t.Fatalf("displaced twice: %s", show(more))
	}
	if got := show(s.Tick(at(time.Hour))); got != "" {
		t.Fatalf("tick after displacement: %q, want nothing more for a", got)
	}
	s.Release("a", now)
	if _, err := s.Claim(l, []int{0}, now); err != nil {
		t.Fatal(err)
	}
}

// Displace ends nothing when the claim would be refused anyway: one of
// its GPUs is held by a lease that does not yield.
func TestDisplaceNothingForNothing(t *testing.T) {
	s := newSched(2)
	if _, err := claimAs(s, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "held", auction.Silver, t0, 1)
	s.Establish("rb")
	gone, err := claimAs(s, "b", "rb", at(time.Minute), 0, 1)
	if gone != nil || !errors.Is(err, ErrRaced) {
		t.Fatalf("claim of a soft and a held GPU: displaced %v, %v", gone, err)
	}
	// Nor when the job's lease ran before (a duplicate), or the lease is
	// over before it could run.
	s.Release("held", t0)
	mustClaim(t, s, "ran", auction.Silver, t0, 1)
	s.Release("ran", t0)
	for _, l := range []*auction.Lease{mkLease("ran", auction.Silver, 1, t0, time.Hour), mkLease("over", auction.Silver, 1, t0, time.Second)} {
		l.Renter = "rb"
		if acts := s.Displace(l, []int{0}, at(time.Minute)); acts != nil {
			t.Fatalf("%s: displaced %s for a claim that fails", l.JobID, show(acts))
		}
	}
	if in, ok := s.Lease("a", at(time.Minute)); !ok || in.Ending != 0 {
		t.Fatalf("a after claims that could not succeed: %+v %v", in, ok)
	}
}

// At most max(1, GPUs/4) GPUs are held by newcomers' awards in their
// grace; a newcomer's award beyond that has no grace.
func TestNewcomerCap(t *testing.T) {
	s := newSched(8) // a cap of 2
	for i, job := range []string{"n1", "n2", "n3"} {
		if _, err := claimAs(s, job, "r"+job, t0, i); err != nil {
			t.Fatal(err)
		}
	}
	now := at(time.Millisecond)
	if gone, err := claimAs(s, "x", "rx", now, 1); !errors.Is(err, ErrRaced) || gone != nil {
		t.Fatalf("claim over n2, in its grace: %v %v", gone, err)
	}
	if gone, err := claimAs(s, "y", "ry", now, 2); err != nil || !slices.Equal(gone, []string{"n3"}) {
		t.Fatalf("claim over n3, beyond the cap: displaced %v, %v; want n3 displaced at once", gone, err)
	}
	// A started newcomer's lease frees its place under the cap.
	mustStart(t, s, "n1", now)
	if _, err := claimAs(s, "z", "rz", now, 3); err != nil {
		t.Fatal(err)
	}
	if gone, err := claimAs(s, "w", "rw", now, 3); !errors.Is(err, ErrRaced) || gone != nil {
		t.Fatalf("claim over z, in its grace under the cap: %v %v", gone, err)
	}
	// One GPU: a cap of one.
	one := newSched(1)
	if _, err := claimAs(one, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	if gone, err := claimAs(one, "b", "rb", at(time.Second), 0); !errors.Is(err, ErrRaced) || gone != nil {
		t.Fatalf("one GPU, claim in a's grace: %v %v", gone, err)
	}
}

// A newcomer's unstarted award hides nothing: quotes name its GPUs
// (after free ones, and those past their grace before those in it), the
// load and the bookings leave them out.
func TestPlanCountsSoftAwardsFree(t *testing.T) {
	span := Span{t0, at(time.Hour)}
	s := newSched(1)
	if _, err := claimAs(s, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	// Not within its start window: its renter is most likely starting it.
	if p, err := s.Plan(1, auction.Silver, span, t0); !errors.Is(err, ErrHeld) {
		t.Fatalf("plan over a newcomer's award of moments ago: %v %v, want held", p, err)
	}
	// Except to a renter that pays here: its award displaces it at once.
	s.Establish("rpaid")
	if p, _, err := s.PlanHeld(Holder{Renter: "rpaid", JobID: "p"}, 1, auction.Silver, span, t0); err != nil || !slices.Equal(p, []int{0}) {
		t.Fatalf("an established renter's plan over a newcomer's award of moments ago: %v %v", p, err)
	}
	s.ReleaseHold(Holder{Renter: "rpaid", JobID: "p"}, t0)
	if p, err := s.Plan(1, auction.Silver, span, at(NewcomerStartWindow)); err != nil || !slices.Equal(p, []int{0}) {
		t.Fatalf("plan over a newcomer's award past its start window: %v %v", p, err)
	}
	if u := s.Utilisation(auction.Silver, t0); u != 0 {
		t.Fatalf("utilisation %v with a newcomer's award, want 0", u)
	}
	if b := s.Booked(t0, time.Hour); b != nil {
		t.Fatalf("booked %+v for a newcomer's award", b)
	}
	mustStart(t, s, "a", t0)
	if _, err := s.Plan(1, auction.Silver, span, t0); !errors.Is(err, ErrBusy) {
		t.Fatalf("plan over a started lease: %v, want busy", err)
	}

	s = newSched(3)
	if _, err := claimAs(s, "old", "r1", t0, 0); err != nil {
		t.Fatal(err)
	}
	now := at(DefaultNewcomerGrace)
	if _, err := claimAs(s, "new", "r2", now, 1); err != nil {
		t.Fatal(err)
	}
	now = now.Add(NewcomerStartWindow) // past new's start window, in its grace
	for _, want := range [][]int{{2}, {0}, {1}} {
		if p, err := s.Plan(1, auction.Silver, Span{now, at(time.Hour)}, now); err != nil || !slices.Equal(p, want) {
			t.Fatalf("plan %v %v, want %v: free, then past its grace, then in it", p, err, want)
		}
		s.gpus[want[0]].quoted = 1 << 40 // out of the way of the next plan
		if want[0] != 1 {
			s.gpus[want[0]].out = "test"
		}
	}
}

// A voucher that pays for an interval of a started lease establishes its
// renter; an award of an established renter that expires unstarted makes
// it a newcomer again; the set is bounded, the least recent first out.
func TestEstablished(t *testing.T) {
	s := newSched(2)
	if _, err := claimAs(s, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.PaidTotal("a", 1); err != nil || s.Established("ra") {
		t.Fatalf("a voucher before the start established ra (%v)", err)
	}
	mustStart(t, s, "a", t0)
	if err := s.PaidTotal("a", 1); err != nil || s.Established("ra") {
		t.Fatalf("a voucher for less than an interval established ra (%v)", err)
	}
	if err := s.PaidTotal("a", IntervalPrice(mkLease("a", auction.Silver, 1, t0, time.Hour))); err != nil || !s.Established("ra") {
		t.Fatalf("a voucher for an interval did not establish ra (%v)", err)
	}
	if _, err := claimAs(s, "a2", "ra", t0, 1); err != nil {
		t.Fatal(err)
	}
	if got := show(s.Tick(at(DefaultStartDeadline))); got != "expire:a2" {
		t.Fatalf("tick at the start deadline: %q", got)
	}
	if s.Established("ra") {
		t.Fatal("ra left an award unstarted and is still established")
	}

	b := New()
	for i := range MaxEstablished + 1 {
		b.Establish(fmt.Sprint("r", i))
	}
	if !b.Established(fmt.Sprint("r", MaxEstablished)) || b.Established("r0") || len(b.est) > MaxEstablished {
		t.Fatalf("bounded set: %d renters, newest %v, oldest %v", len(b.est),
			b.Established(fmt.Sprint("r", MaxEstablished)), b.Established("r0"))
	}
}

// A lease held again after a restart (Kept) is never displaced, and the
// rule can be turned off.
func TestKeptAndRuleOff(t *testing.T) {
	s := newSched(1)
	if _, err := s.Claim(mkLease("k", auction.Silver, 1, t0, time.Hour), []int{0}, t0, Kept()); err != nil {
		t.Fatal(err)
	}
	s.Establish("rb")
	if gone, err := claimAs(s, "b", "rb", at(time.Minute), 0); gone != nil || !errors.Is(err, ErrRaced) {
		t.Fatalf("claim over a kept lease: %v %v", gone, err)
	}
	off := newSched(1, WithNewcomerGrace(-1))
	if _, err := claimAs(off, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	off.Establish("rb")
	if gone, err := claimAs(off, "b", "rb", at(time.Minute), 0); gone != nil || !errors.Is(err, ErrRaced) {
		t.Fatalf("rule off: %v %v", gone, err)
	}
	if _, err := off.Plan(1, auction.Silver, Span{t0, at(time.Hour)}, t0); !errors.Is(err, ErrBusy) {
		t.Fatalf("rule off, plan: %v", err)
	}
}

// GraceEnds says how long a newcomer's award may wait for the grace of
// the awards in its way, and only when nothing else is in its way.
func TestGraceEnds(t *testing.T) {
	s := newSched(2)
	if _, err := claimAs(s, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	b := mkLease("b", auction.Silver, 1, at(time.Second), time.Hour)
	if got := s.GraceEnds(b, []int{0}, at(time.Second)); !got.Equal(at(DefaultNewcomerGrace)) {
		t.Fatalf("a newcomer's claim within a's grace: %v, want a's grace to end at %v", got, at(DefaultNewcomerGrace))
	}
	if got := s.GraceEnds(b, []int{1}, at(time.Second)); !got.IsZero() {
		t.Fatalf("a claim of a free GPU: %v, want nothing to wait for", got)
	}
	s.Establish("renter-b")
	if got := s.GraceEnds(b, []int{0}, at(time.Second)); !got.IsZero() {
		t.Fatalf("an established renter's claim: %v, want it displacing at once", got)
	}
	mustClaim(t, s, "held", auction.Silver, t0, 1)
	nb := mkLease("nb", auction.Silver, 2, at(time.Second), time.Hour)
	if got := s.GraceEnds(nb, []int{0, 1}, at(time.Second)); !got.IsZero() {
		t.Fatalf("a claim over a held GPU too: %v, want nothing to wait for", got)
	}
	mustStart(t, s, "a", at(time.Second))
	if got := s.GraceEnds(mkLease("c", auction.Silver, 1, at(time.Second), time.Hour), []int{0}, at(time.Second)); !got.IsZero() {
		t.Fatalf("a's lease started: %v, want nothing to wait for", got)
	}
}

// The start window keeps a quote off a GPU only for a newcomer's award
// in the span it asks: a newcomer's reservation of moments ago for a
// later hour does not hide the GPU from a quote for now.
func TestStartWindowCoversOnlyTheSpanAsked(t *testing.T) {
	s := newSched(1)
	if _, err := claimAs(s, "a", "ra", t0, 0); err != nil {
		t.Fatal(err)
	}
	now := at(DefaultNewcomerGrace) // a's grace is over: displaceable
	later := mkLease("g", auction.Gold, 1, at(2*time.Hour), time.Hour)
	later.Renter = "rg"
	if _, err := s.Claim(later, []int{0}, now); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Plan(1, auction.Silver, Span{now, at(time.Hour)}, now); err != nil || !slices.Equal(p, []int{0}) {
		t.Fatalf("plan for the hour before a newcomer's reservation of moments ago: %v %v, want GPU 0", p, err)
	}
	if p, err := s.Plan(1, auction.Silver, Span{now, at(3 * time.Hour)}, now); !errors.Is(err, ErrHeld) {
		t.Fatalf("plan over it: %v %v, want held", p, err)
	}
}
