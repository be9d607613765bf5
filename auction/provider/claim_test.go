package provider

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A claim takes exactly the GPUs of its bid or fails with the reason the
// renter acts on.
func TestClaim(t *testing.T) {
	for _, tc := range []struct {
		name    string
		held    func(*testing.T, *Scheduler)
		job     string
		tier    auction.Tier
		gpus    []int
		err     error
		victims string
	}{
		{name: "free GPUs", job: "a", tier: auction.Silver, gpus: []int{0, 1}},
		{name: "held by silver: raced", job: "a", tier: auction.Gold, gpus: []int{1, 2}, err: ErrRaced,
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "s", auction.Silver, t0, 0, 1) }},
		{name: "held by gold: raced", job: "a", tier: auction.Gold, gpus: []int{0}, err: ErrRaced,
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "g", auction.Gold, t0, 0) }},
		{name: "bronze over bronze: raced", job: "a", tier: auction.Bronze, gpus: []int{0}, err: ErrRaced,
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "b", auction.Bronze, t0, 0) }},
		{name: "silver over bronze preempts it", job: "a", tier: auction.Silver, gpus: []int{1, 2}, victims: "preempt:b",
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "b", auction.Bronze, t0, 0, 1) }},
		{name: "gold over two bronze preempts both", job: "a", tier: auction.Gold, gpus: []int{0, 1}, victims: "preempt:b preempt:c",
			held: func(t *testing.T, s *Scheduler) {
				mustClaim(t, s, "b", auction.Bronze, t0, 0)
				mustClaim(t, s, "c", auction.Bronze, t0, 1)
			}},
		{name: "a lease for the job exists", job: "s", tier: auction.Silver, gpus: []int{2}, err: ErrDuplicate,
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "s", auction.Silver, t0, 0) }},
		{name: "the job's lease was released", job: "s", tier: auction.Silver, gpus: []int{0}, err: ErrDuplicate,
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "s", auction.Silver, t0, 0); s.Release("s", t0) }},
		{name: "withdrawn GPU", job: "a", tier: auction.Silver, gpus: []int{3}, err: ErrWithdrawn},
		{name: "unknown GPU", job: "a", tier: auction.Silver, gpus: []int{7}, err: ErrUnknownGPU},
		{name: "the same GPU twice", job: "a", tier: auction.Silver, gpus: []int{0, 0}, err: ErrInvalid},
		{name: "no job", job: "", tier: auction.Silver, gpus: []int{0}, err: ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			s.SetAvailability(availability(4, map[int]string{3: "the owner's game"}), t0)
			if tc.held != nil {
				tc.held(t, s)
			}
			before := holders(s, t0)
			acts, err := s.Claim(mkLease(tc.job, tc.tier, len(tc.gpus), t0, time.Hour), tc.gpus, t0)
			if !errors.Is(err, tc.err) {
				t.Fatalf("claim: %v, want %v", err, tc.err)
			}
			if got := show(acts); got != tc.victims {
				t.Fatalf("victims %q, want %q", got, tc.victims)
			}
			after := holders(s, t0)
			if tc.err != nil {
				if !mapsEqual(before, after) {
					t.Fatalf("a refused claim changed the commitments: %v -> %v", before, after)
				}
				return
			}
			for _, g := range tc.gpus {
				if !slices.Equal(after[g], []string{tc.job}) {
					t.Fatalf("GPU %d committed to %v, want only %s", g, after[g], tc.job)
				}
			}
		})
	}
}

func mapsEqual(a, b map[int][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// A lease that took GPUs from bronze launches only once the bronze job
// has released them; the victim keeps, and frees, only its other GPUs.
func TestClaimOverBronzeWaitsForVictim(t *testing.T) {
	s := newSched(3)
	mustClaim(t, s, "b", auction.Bronze, t0, 0, 1)
	if _, err := s.Start("b", t0); err != nil {
		t.Fatal(err)
	}
	acts := mustClaim(t, s, "s", auction.Silver, at(time.Minute), 1, 2)
	if len(acts) != 1 || acts[0].Kind != Preempt || acts[0].Reason != ReasonHigherTier || acts[0].Notice != 30*time.Second {
		t.Fatalf("claim over bronze: %+v", acts)
	}
	if in, _ := s.Lease("b", at(time.Minute)); !slices.Equal(in.GPUs, []int{0}) || in.Ending != Preempt {
		t.Fatalf("victim keeps %v ending %v, want [0] preempted", in.GPUs, in.Ending)
	}
	launch, err := s.Start("s", at(time.Minute))
	if err != nil || len(launch) != 0 {
		t.Fatalf("start before the victim released: %v %v", launch, err)
	}
	if in, _ := s.Lease("s", at(time.Minute)); !slices.Equal(in.WaitingFor, []string{"b"}) {
		t.Fatalf("waiting for %v", in.WaitingFor)
	}
	if acts := s.Tick(at(time.Hour / 2)); len(acts) != 0 {
		t.Fatalf("tick while the victim drains: %s", show(acts))
	}
	if got := show(s.Release("b", at(time.Minute+30*time.Second))); got != "launch:s" {
		t.Fatalf("release of the victim: %q, want launch:s", got)
	}
	h := holders(s, at(2*time.Minute))
	if len(h[0]) != 0 || !slices.Equal(h[1], []string{"s"}) || !slices.Equal(h[2], []string{"s"}) {
		t.Fatalf("commitments after the handover: %v", h)
	}
}

// A gold reservation holds its GPUs for its own window, waits for its
// start to launch, and CanPromise agrees with Claim: the gap before it is
// sold to silver that ends in time, never to silver that would cross it.
func TestGoldReservation(t *testing.T) {
	s := newSched(2)
	start := at(10 * time.Minute)
	g := mkLease("g", auction.Gold, 1, start, time.Hour)
	if err := s.CanPromise([]int{0}, auction.Gold, Span{start, start.Add(time.Hour)}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(g, []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.CanPromise([]int{0}, auction.Silver, Span{t0, at(5 * time.Minute)}, t0); err != nil {
		t.Fatalf("promise of the gap before a reservation: %v", err)
	}
	if err := s.CanPromise([]int{0}, auction.Silver, Span{t0, at(15 * time.Minute)}, t0); !errors.Is(err, ErrRaced) {
		t.Fatalf("promise of silver that crosses a reservation: %v, want raced", err)
	}
	if err := s.CanPromise([]int{0}, auction.Gold, Span{at(30 * time.Minute), at(2 * time.Hour)}, t0); !errors.Is(err, ErrRaced) {
		t.Fatalf("promise of a second reservation overlapping the first: %v, want raced", err)
	}
	if err := s.CanPromise([]int{1}, auction.Silver, Span{t0, at(5 * time.Minute)}, t0); err != nil {
		t.Fatal(err)
	}
	if acts, err := s.Start("g", at(time.Second)); err != nil || len(acts) != 0 {
		t.Fatalf("start of a reservation: %v %v, want no launch yet", acts, err)
	}
	if due := s.Due(); !due.Equal(start) {
		t.Fatalf("due %v, want the reservation's start %v", due, start)
	}
	if acts := s.Tick(start.Add(-time.Nanosecond)); len(acts) != 0 {
		t.Fatalf("before the start: %s", show(acts))
	}
	if got := show(s.Tick(start)); got != "launch:g" {
		t.Fatalf("at the start: %q", got)
	}
}

// A GPU over the owner's hard limit stops every lease on it, silver and
// gold too, with their notice; one only withdrawn (over the soft limit)
// preempts bronze alone.
func TestAHardLimitStopsEveryTier(t *testing.T) {
	s := newSched(3)
	mustClaim(t, s, "s", auction.Silver, t0, 0)
	mustClaim(t, s, "g", auction.Gold, t0, 1)
	mustClaim(t, s, "b", auction.Bronze, t0, 2)
	soft := availability(3, map[int]string{0: "temperature 86°C over limit 85°C", 1: "temperature 86°C over limit 85°C"})
	if acts := s.SetAvailability(soft, at(time.Minute)); len(acts) != 0 {
		t.Fatalf("over the soft limit: %s, want silver and gold left alone", show(acts))
	}
	hard := availability(3, map[int]string{0: "temperature 96°C", 1: "temperature 96°C"})
	hard.Stop = map[int]string{0: "temperature 96°C over the hard limit 95°C", 1: "temperature 96°C over the hard limit 95°C"}
	acts := s.SetAvailability(hard, at(2*time.Minute))
	if show(acts) != "preempt:s preempt:g" || acts[0].Reason != ReasonHardLimit || acts[0].Notice != 30*time.Second {
		t.Fatalf("over the hard limit: %s %+v, want silver and gold stopped with their notice", show(acts), acts)
	}
}

// A GPU the driver reports faulty (attest's Faults, also in Stop) stops
// every lease on it with the typed fault reason, not the hard limit's.
func TestAGPUFaultStopsEveryTierWithItsReason(t *testing.T) {
	s := newSched(3)
	mustClaim(t, s, "s", auction.Silver, t0, 0)
	mustClaim(t, s, "b", auction.Bronze, t0, 1)
	mustClaim(t, s, "h", auction.Gold, t0, 2)
	why := "the driver reported Xid 79, a critical GPU error"
	a := availability(3, map[int]string{0: why, 2: "hot"})
	a.Stop = map[int]string{0: why, 2: "temperature 96°C over the hard limit 95°C"}
	a.Faults = map[int]string{0: why}
	acts := s.SetAvailability(a, at(time.Minute))
	if show(acts) != "preempt:s preempt:h" {
		t.Fatalf("got %s, want the faulty GPU's silver lease and the hot one's gold lease stopped", show(acts))
	}
	if acts[0].Reason != ReasonGPUFault || acts[0].Detail != why || acts[1].Reason != ReasonHardLimit {
		t.Fatalf("reasons %+v, want the fault typed apart from the hard limit", acts)
	}
}
