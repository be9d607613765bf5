package provider

import (
	"errors"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// An award is either started or superseded, never both, and the scheduler
// alone decides which: once BeginSupersede has marked it, no start of it
// succeeds; once it has started, it cannot be marked. The adapter records
// and settles the supersede outside any lock between the mark and the
// release, so the decision must hold across that gap.
func TestAnAwardIsStartedOrSupersededNeverBoth(t *testing.T) {
	s := newSched(1)
	mustClaim(t, s, "j", auction.Silver, t0, 0)
	first, _ := s.Lease("j", t0)
	if !s.BeginSupersede(&first.Lease) {
		t.Fatal("an unstarted award could not be marked superseding")
	}
	if in, _ := s.Lease("j", t0); !in.Superseding {
		t.Fatal("the snapshot does not show the award superseding")
	}
	if s.BeginSupersede(&first.Lease) {
		t.Fatal("an award was marked superseding twice")
	}
	if _, err := s.StartLease(&first.Lease, t0); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("start of a superseding award: %v, want ErrSuperseded", err)
	}
	if _, err := s.Start("j", t0); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("start by job ID of a superseding award: %v, want ErrSuperseded", err)
	}
	// Its end could not be recorded: the mark is taken back, and the award
	// is an award again, which its renter may still start.
	s.CancelSupersede(&first.Lease)
	if _, err := s.StartLease(&first.Lease, t0); err != nil {
		t.Fatalf("start after the supersede was called off: %v", err)
	}
	if s.BeginSupersede(&first.Lease) {
		t.Fatal("a started lease was marked superseding")
	}
	if in, _ := s.Lease("j", t0); in.State != Started || in.Superseding {
		t.Fatalf("the started lease reads %s, superseding %v", in.State, in.Superseding)
	}
}

// A start names its lease, not only its job: once the renter's new award
// holds the job, a start of the award it superseded is refused, and does
// not start the new one.
func TestAStartOfASupersededAwardDoesNotStartItsSuccessor(t *testing.T) {
	s := newSched(1)
	old := mkLease("j", auction.Silver, 1, t0, time.Hour)
	old.Bid = []byte("bid-1")
	s.Establish(old.Renter)
	if _, err := s.Claim(old, []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	if !s.BeginSupersede(old) {
		t.Fatal("not marked")
	}
	if _, ok := s.Supersede("j", t0); !ok {
		t.Fatal("not superseded")
	}
	if _, err := s.StartLease(old, t0); !errors.Is(err, ErrNoLease) {
		t.Fatalf("start of the superseded award before its successor: %v, want ErrNoLease", err)
	}
	successor := *old
	successor.Bid = []byte("bid-2")
	if _, err := s.Claim(&successor, []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartLease(old, t0); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("start of the superseded award: %v, want ErrSuperseded", err)
	}
	if in, _ := s.Lease("j", t0); in.State != Awarded || !in.IsLease(&successor) || in.IsLease(old) {
		t.Fatalf("the successor reads %s (is it: %v, is the old: %v)", in.State, in.IsLease(&successor), in.IsLease(old))
	}
	if _, err := s.StartLease(&successor, t0); err != nil {
		t.Fatalf("start of the successor: %v", err)
	}
	if s.BeginSupersede(old) {
		t.Fatal("the superseded award was marked again, over its successor")
	}
}

// IsLease tells two leases of one job apart by any field.
func TestInfoIsLeaseComparesEveryField(t *testing.T) {
	base := mkLease("j", auction.Silver, 1, t0, time.Hour)
	base.Bid, base.SpecHash, base.GPUUUIDHash = []byte("bid"), []byte("spec"), []string{"h0"}
	in := Info{Lease: *base}
	if !in.IsLease(base) {
		t.Fatal("a lease is not itself")
	}
	for name, change := range map[string]func(l *auction.Lease){
		"network":   func(l *auction.Lease) { l.Network = "other" },
		"renter":    func(l *auction.Lease) { l.Renter = "other" },
		"provider":  func(l *auction.Lease) { l.Provider = "other" },
		"tier":      func(l *auction.Lease) { l.Tier = auction.Gold },
		"price":     func(l *auction.Lease) { l.Price++ },
		"gpus":      func(l *auction.Lease) { l.GPUs++ },
		"start":     func(l *auction.Lease) { l.Start++ },
		"end":       func(l *auction.Lease) { l.End++ },
		"notice":    func(l *auction.Lease) { l.NoticeSec++ },
		"billing":   func(l *auction.Lease) { l.BillingSec++ },
		"bid":       func(l *auction.Lease) { l.Bid = []byte("other") },
		"gpu hash":  func(l *auction.Lease) { l.GPUUUIDHash = []string{"h1"} },
		"spec hash": func(l *auction.Lease) { l.SpecHash = []byte("other") },
	} {
		other := *base
		change(&other)
		if in.IsLease(&other) {
			t.Errorf("a lease whose %s differs reads as the same lease", name)
		}
	}
}
