package provider

import (
	"errors"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Supersede frees an award that was never started and leaves no ended
// mark, so that its job can be claimed again; a started lease is left as
// it is.
func TestSupersede(t *testing.T) {
	s := newSched(1, WithRetention(time.Hour))
	mustClaim(t, s, "j", auction.Silver, t0, 0)
	if _, ok := s.Supersede("j", at(time.Minute)); !ok {
		t.Fatal("an unstarted award was not superseded")
	}
	if _, ok := s.Lease("j", at(time.Minute)); ok || len(s.Commitments(at(time.Minute))) != 0 {
		t.Fatal("a superseded award still holds its GPU")
	}
	if st, ok := s.Ended("j"); ok {
		t.Fatalf("a superseded award left an ended mark (%s)", st)
	}
	if _, ok := s.Supersede("j", at(time.Minute)); ok {
		t.Fatal("superseded twice")
	}
	// The renter's new award for the job claims the same GPU.
	mustClaim(t, s, "j", auction.Silver, at(time.Minute), 0)
	if _, err := s.Start("j", at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if acts, ok := s.Supersede("j", at(2*time.Minute)); ok || acts != nil {
		t.Fatalf("a started lease was superseded: %s", show(acts))
	}
	if in, ok := s.Lease("j", at(2*time.Minute)); !ok || in.State != Started {
		t.Fatalf("the started lease is %+v, %v", in.State, ok)
	}
	// Its release marks it ended for the whole retention: the superseded
	// award's release left nothing to forget it early.
	s.Release("j", at(30*time.Minute))
	mustClaim(t, s, "k", auction.Silver, at(80*time.Minute), 0)
	s.Release("k", at(80*time.Minute))
	if st, ok := s.Ended("j"); !ok || st != Ended {
		t.Fatalf("j ended as %q %v within its retention", st, ok)
	}
}

// A job whose run ended here (preempted, say) may be claimed again by a
// new lease, its renter's new auction: a preemption must not bar the job
// from the provider that preempted it. The ended run's own lease, sent
// again, is refused: that run is over.
func TestAnEndedJobIsClaimedAgainOnlyByANewLease(t *testing.T) {
	s := New()
	s.SetAvailability(availability(1, nil), t0)
	first := mkLease("j", auction.Bronze, 1, t0, time.Hour)
	first.Bid = []byte("bid-1")
	s.Establish(first.Renter)
	if _, err := s.Claim(first, []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	s.Release("j", t0.Add(time.Minute))
	if _, err := s.Claim(first, []int{0}, t0.Add(2*time.Minute)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the ended run's lease, sent again, was claimed: %v", err)
	}
	again := mkLease("j", auction.Bronze, 1, t0.Add(2*time.Minute), time.Hour)
	again.Bid = []byte("bid-2")
	if _, err := s.Claim(again, []int{0}, t0.Add(2*time.Minute)); err != nil {
		t.Fatalf("the job's new lease after its run ended was refused: %v", err)
	}
	s.Release("j", t0.Add(3*time.Minute))
	if _, err := s.Claim(first, []int{0}, t0.Add(4*time.Minute)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the first run's lease, sent after a second run ended: %v, want ErrDuplicate", err)
	}
}
