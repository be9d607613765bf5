package provider

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A plan names free GPUs first, bronze-held ones only for silver and gold,
// never a withdrawn GPU or one a silver or gold lease holds.
func TestPlan(t *testing.T) {
	hour := Span{t0, at(time.Hour)}
	for _, tc := range []struct {
		name string
		held func(*testing.T, *Scheduler)
		n    int
		tier auction.Tier
		want [][]int // any of these
		err  error
		span Span // zero: the next hour
		now  time.Time
	}{
		{name: "free GPUs", n: 2, tier: auction.Silver, want: [][]int{{0, 1}}},
		{name: "never a withdrawn GPU", n: 4, tier: auction.Bronze, err: ErrBusy},
		{name: "bronze does not plan over bronze", n: 2, tier: auction.Bronze, err: ErrBusy,
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "b", auction.Bronze, t0, 0, 1) }},
		{name: "silver plans over bronze after the free GPU", n: 2, tier: auction.Silver, want: [][]int{{0, 2}, {1, 2}},
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "b", auction.Bronze, t0, 0, 1) }},
		{name: "gold plans over bronze", n: 3, tier: auction.Gold, want: [][]int{{0, 1, 2}},
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "b", auction.Bronze, t0, 0, 1) }},
		{name: "gold does not plan over silver", n: 2, tier: auction.Gold, err: ErrBusy,
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "s", auction.Silver, t0, 0, 1) }},
		{name: "silver does not plan over gold", n: 1, tier: auction.Silver, want: [][]int{{2}},
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "g", auction.Gold, t0, 0, 1) }},
		{name: "a lease past its end holds its GPUs until released", n: 3, tier: auction.Silver, err: ErrBusy,
			span: Span{at(2 * time.Hour), at(3 * time.Hour)}, now: at(2 * time.Hour),
			held: func(t *testing.T, s *Scheduler) { mustClaim(t, s, "s", auction.Silver, t0, 0) }},
		{name: "no GPUs", n: 0, tier: auction.Silver, err: ErrInvalid},
		{name: "a span that is over", n: 1, tier: auction.Silver, err: ErrInvalid, span: Span{at(-time.Hour), at(-time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			s.SetAvailability(availability(4, map[int]string{3: "the owner's game"}), t0)
			if tc.held != nil {
				tc.held(t, s)
			}
			span, now := tc.span, tc.now
			if span.End.IsZero() {
				span = hour
			}
			if now.IsZero() {
				now = t0
			}
			got, err := s.Plan(tc.n, tc.tier, span, now)
			if !errors.Is(err, tc.err) {
				t.Fatalf("plan: %v, want %v", err, tc.err)
			}
			if tc.err == nil && !slices.ContainsFunc(tc.want, func(w []int) bool { return slices.Equal(w, got) }) {
				t.Fatalf("plan %v, want one of %v", got, tc.want)
			}
		})
	}
}

// Consecutive plans name different GPUs, the least recently quoted first,
// even at one instant; GPUs claimed meanwhile are skipped.
func TestPlansSpread(t *testing.T) {
	s := newSched(8)
	span := Span{t0, at(time.Hour)}
	seen := map[int]bool{}
	for range 8 {
		p, err := s.Plan(1, auction.Silver, span, t0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[p[0]] {
			t.Fatalf("GPU %d named twice in 8 plans", p[0])
		}
		seen[p[0]] = true
	}
	// Two-GPU plans: four of them cover all eight GPUs.
	seen = map[int]bool{}
	for range 4 {
		p, _ := s.Plan(2, auction.Silver, span, t0)
		seen[p[0]], seen[p[1]] = true, true
	}
	if len(seen) != 8 {
		t.Fatalf("4 two-GPU plans named %d GPUs, want 8", len(seen))
	}
	mustClaim(t, s, "a", auction.Silver, t0, 0, 1, 2)
	seen = map[int]bool{}
	for range 5 {
		p, _ := s.Plan(1, auction.Silver, span, t0)
		if p[0] <= 2 || seen[p[0]] {
			t.Fatalf("plan named GPU %d (claimed or named again) among %v", p[0], seen)
		}
		seen[p[0]] = true
	}
}

// A plan reserves nothing: planning every GPU leaves them all claimable.
func TestPlanReservesNothing(t *testing.T) {
	s := newSched(2)
	if _, err := s.Plan(2, auction.Silver, Span{t0, at(time.Hour)}, t0); err != nil {
		t.Fatal(err)
	}
	if u := s.Utilisation(auction.Silver, t0); u != 0 {
		t.Fatalf("utilisation %v after a plan, want 0", u)
	}
	mustClaim(t, s, "a", auction.Bronze, t0, 0, 1)
}

func TestHashesAndIndexes(t *testing.T) {
	s := newSched(3)
	h, err := s.Hashes([]int{2, 0})
	if err != nil || len(h) != 2 {
		t.Fatal(h, err)
	}
	idx, err := s.Indexes(h)
	if err != nil || !slices.Equal(idx, []int{2, 0}) {
		t.Fatalf("indexes %v, %v", idx, err)
	}
	if _, err := s.Hashes([]int{3}); !errors.Is(err, ErrUnknownGPU) {
		t.Fatalf("hash of GPU 3: %v", err)
	}
	if _, err := s.Indexes([]string{"not-here"}); !errors.Is(err, ErrUnknownGPU) {
		t.Fatalf("index of an unknown hash: %v", err)
	}
}

// Bronze-held GPUs count as free for silver and gold, not for bronze;
// withdrawn GPUs are not counted at all.
func TestUtilisation(t *testing.T) {
	s := New()
	s.SetAvailability(availability(5, map[int]string{4: "owner"}), t0)
	mustClaim(t, s, "b", auction.Bronze, t0, 0)
	mustClaim(t, s, "s", auction.Silver, t0, 1)
	for tier, want := range map[auction.Tier]float64{auction.Bronze: 0.5, auction.Silver: 0.25, auction.Gold: 0.25} {
		if u := s.Utilisation(tier, t0); u != want {
			t.Errorf("%s: %v, want %v", tier, u, want)
		}
	}
	s.SetAvailability(availability(5, map[int]string{0: "x", 1: "x", 2: "x", 3: "x", 4: "x"}), t0)
	if u := s.Utilisation(auction.Gold, t0); u != 1 {
		t.Errorf("nothing sellable: %v, want 1", u)
	}
}
