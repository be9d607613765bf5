package provider

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// holderOf is the quote of job by its renter (mkLease's "renter-"+job)
// under nonce.
func holderOf(job, nonce string) Holder {
	return Holder{Renter: "renter-" + job, JobID: job, Nonce: []byte(nonce)}
}

// quoteHeld plans n GPUs of tier for an hour from now as the quote of job,
// failing the test on any error.
func quoteHeld(t testing.TB, s *Scheduler, job string, tier auction.Tier, n int, now time.Time) []int {
	t.Helper()
	plan, held, err := s.PlanHeld(holderOf(job, "n1"), n, tier, Span{now, now.Add(time.Hour)}, now)
	if err != nil || !held {
		t.Fatalf("quote of %s: plan %v, held %v, %v", job, plan, held, err)
	}
	return plan
}

// Concurrent quotes never promise the same GPU twice, and the award of a
// live quote is never refused for a race: random interleavings of quotes
// (1 to 3 GPUs, bronze or silver, re-quotes of the same job), claims of
// quoted jobs, releases and the passing of time, on an 8-GPU machine. A
// quote either names GPUs no other live hold names, or is declined as
// held (free GPUs exist but are promised) or busy (none is free); a claim
// whose hold is live always succeeds. Renters are established, as in a
// burst of paying renters: a newcomer's unstarted award may be named by
// another quote in its grace by design (newcomer.go).
func TestHoldsNeverPromiseTwice(t *testing.T) {
	type quoted struct {
		plan  []int
		tier  auction.Tier
		nonce string
		until time.Time // the hold's end
	}
	heldDeclines, claimed := 0, 0
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 33))
		s := newSched(8)
		now := t0
		live := map[string]*quoted{} // job -> its live quote, as the test sees it
		leased := map[string]bool{}
		for step := range 120 {
			job := fmt.Sprint("job", r.IntN(24))
			switch op := r.IntN(10); {
			case op < 5: // a quote (a re-quote, if the job has one)
				if leased[job] {
					continue
				}
				tier := []auction.Tier{auction.Bronze, auction.Silver}[r.IntN(2)]
				n := 1 + r.IntN(3)
				s.Establish("renter-" + job)
				nonce := fmt.Sprint("n", step)
				plan, held, err := s.PlanHeld(holderOf(job, nonce), n, tier, Span{now, now.Add(time.Hour)}, now)
				delete(live, job) // replaced, or dropped by the decline
				if errors.Is(err, ErrHeld) {
					heldDeclines++
					continue
				}
				if errors.Is(err, ErrBusy) {
					continue
				}
				if err != nil || !held {
					t.Fatalf("seed %d step %d: quote of %s: held %v, %v", seed, step, job, held, err)
				}
				for other, q := range live {
					if now.Before(q.until) {
						for _, g := range plan {
							if slices.Contains(q.plan, g) {
								t.Fatalf("seed %d step %d: %s's quote names GPU %d, promised to %s's live quote %v", seed, step, job, g, other, q.plan)
							}
						}
					}
				}
				live[job] = &quoted{plan: plan, tier: tier, nonce: nonce, until: now.Add(DefaultQuoteHold)}
			case op < 8: // an award of a quoted job
				q := live[job]
				if q == nil {
					continue
				}
				delete(live, job)
				_, err := s.Claim(mkLease(job, q.tier, len(q.plan), now, time.Hour), q.plan, now)
				if now.Before(q.until) && err != nil {
					t.Fatalf("seed %d step %d: the award of %s's live quote %v: %v", seed, step, job, q.plan, err)
				}
				if err == nil {
					leased[job] = true
					claimed++
				}
			case op < 9: // the renter released it: it awarded another provider
				if q := live[job]; q != nil {
					if s.ReleaseHold(holderOf(job, "another round"), now) {
						t.Fatalf("a release with another round's nonce ended %s's hold", job)
					}
					if got := s.ReleaseHold(holderOf(job, q.nonce), now); got != now.Before(q.until) {
						t.Fatalf("seed %d step %d: release of %s's hold: %v, live %v", seed, step, job, got, now.Before(q.until))
					}
					delete(live, job)
				}
			default: // time passes; holds lapse
				now = now.Add(time.Duration(r.IntN(5)) * time.Second)
			}
		}
	}
	if heldDeclines == 0 || claimed == 0 {
		t.Fatalf("%d held declines and %d claims: the interleavings never contended", heldDeclines, claimed)
	}
	t.Logf("%d quotes declined as held, %d awards claimed", heldDeclines, claimed)
}

// A hold keeps its GPUs from other jobs' quotes and claims until it
// lapses; its own job's claim consumes it.
func TestHoldLifetime(t *testing.T) {
	s := newSched(2)
	a := quoteHeld(t, s, "a", auction.Silver, 2, t0)
	// Another job's quote: the GPUs are free but promised.
	if _, _, err := s.PlanHeld(holderOf("b", "n1"), 1, auction.Silver, burstSpan, t0); !errors.Is(err, ErrHeld) {
		t.Fatalf("b's quote while a's hold lives: %v, want ErrHeld", err)
	}
	if _, err := s.Plan(1, auction.Gold, burstSpan, t0); !errors.Is(err, ErrHeld) {
		t.Fatalf("a gold plan while a's hold lives: %v, want ErrHeld", err)
	}
	// Another job's award over the held GPUs (a bid made before the hold,
	// or without one) is refused as raced: a's award must not be.
	s.Establish("renter-b")
	if _, err := s.Claim(mkLease("b", auction.Gold, 1, t0, time.Hour), a[:1], t0.Add(time.Second)); !errors.Is(err, ErrRaced) {
		t.Fatalf("b's claim of a held GPU: %v, want ErrRaced", err)
	}
	// Just before it lapses it still holds; at its end it is gone.
	end := t0.Add(DefaultQuoteHold)
	if _, _, err := s.PlanHeld(holderOf("b", "n1"), 1, auction.Silver, Span{end.Add(-time.Nanosecond), end.Add(time.Hour)}, end.Add(-time.Nanosecond)); !errors.Is(err, ErrHeld) {
		t.Fatalf("b's quote a nanosecond before the hold lapses: %v", err)
	}
	if n := s.Holds(end); n != 0 {
		t.Fatalf("%d holds live at the hold's end, want 0", n)
	}
	b := quoteHeld(t, s, "b", auction.Silver, 1, end)
	// a's award now: its hold lapsed and one of its GPUs went to b's quote.
	s.Establish("renter-a")
	if _, err := s.Claim(mkLease("a", auction.Silver, 2, end, time.Hour), a, end); !errors.Is(err, ErrRaced) {
		t.Fatalf("a's claim after its hold lapsed, over b's live one: %v, want ErrRaced", err)
	}
	// b's own claim consumes its hold.
	mustClaim(t, s, "b", auction.Silver, end, b...)
	if n := s.Holds(end); n != 0 {
		t.Fatalf("%d holds live after b's claim, want 0", n)
	}
}

// WithQuoteHold sets the lifetime.
func TestHoldOption(t *testing.T) {
	s := newSched(1, WithQuoteHold(3*time.Second))
	quoteHeld(t, s, "a", auction.Silver, 1, t0)
	if n := s.Holds(t0.Add(3*time.Second - 1)); n != 1 {
		t.Fatalf("%d holds just before 3 s", n)
	}
	if n := s.Holds(t0.Add(3 * time.Second)); n != 0 {
		t.Fatalf("%d holds at 3 s", n)
	}
}

// A release by the hold's renter with its round's nonce frees the GPUs at
// once; one by another renter, or with another nonce, does nothing; a
// re-quote of the job replaces its hold, so the old round's nonce no
// longer releases it.
func TestHoldRelease(t *testing.T) {
	s := newSched(1)
	quoteHeld(t, s, "a", auction.Silver, 1, t0)
	for _, h := range []Holder{
		{Renter: "a stranger", JobID: "a", Nonce: []byte("n1")},
		{Renter: "renter-a", JobID: "a", Nonce: []byte("another round")},
		{Renter: "renter-a", JobID: "another job", Nonce: []byte("n1")},
	} {
		if s.ReleaseHold(h, t0) {
			t.Fatalf("release by %+v ended the hold", h)
		}
		if _, err := s.Plan(1, auction.Silver, burstSpan, t0); !errors.Is(err, ErrHeld) {
			t.Fatalf("after a release by %+v: %v, want the GPU still held", h, err)
		}
	}
	// A re-quote under a new nonce replaces the hold.
	if _, held, err := s.PlanHeld(holderOf("a", "n2"), 1, auction.Silver, burstSpan, t0); err != nil || !held {
		t.Fatalf("re-quote: held %v, %v", held, err)
	}
	if s.Holds(t0) != 1 {
		t.Fatalf("%d holds after a re-quote, want its one", s.Holds(t0))
	}
	if s.ReleaseHold(holderOf("a", "n1"), t0) {
		t.Fatal("the replaced round's nonce released the new hold")
	}
	if !s.ReleaseHold(holderOf("a", "n2"), t0) {
		t.Fatal("the renter's release with its round's nonce did nothing")
	}
	if p, err := s.Plan(1, auction.Silver, burstSpan, t0); err != nil || !slices.Equal(p, []int{0}) {
		t.Fatalf("after the release: %v, %v; want GPU 0 free at once", p, err)
	}
}

// A decline says which: GPUs promised to live quotes (ask again shortly),
// or none free (leased).
func TestHoldHeldOrBusy(t *testing.T) {
	s := newSched(2)
	mustClaim(t, s, "leased", auction.Silver, t0, 0)
	quoteHeld(t, s, "a", auction.Silver, 1, t0)
	if _, err := s.Plan(1, auction.Silver, burstSpan, t0); !errors.Is(err, ErrHeld) {
		t.Fatalf("the free GPU promised: %v, want ErrHeld", err)
	}
	if _, err := s.Plan(2, auction.Silver, burstSpan, t0); !errors.Is(err, ErrBusy) {
		t.Fatalf("two GPUs, one leased: %v, want ErrBusy", err)
	}
}

// Holds for spans that do not overlap leave each other alone: a gold
// reservation next week holds its GPUs for its window, not today.
func TestHoldSpans(t *testing.T) {
	s := newSched(1)
	week := Span{at(7 * 24 * time.Hour), at(7*24*time.Hour + time.Hour)}
	if _, held, err := s.PlanHeld(holderOf("gold", "n"), 1, auction.Gold, week, t0); err != nil || !held {
		t.Fatalf("gold: held %v, %v", held, err)
	}
	if _, held, err := s.PlanHeld(holderOf("now", "n"), 1, auction.Silver, burstSpan, t0); err != nil || !held {
		t.Fatalf("silver now beside next week's gold hold: held %v, %v", held, err)
	}
	if _, _, err := s.PlanHeld(holderOf("gold2", "n"), 1, auction.Gold, week, t0); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second gold quote for the same window: %v, want ErrHeld", err)
	}
}

// Memory is bounded: a renter holds for at most MaxHoldsPerRenter jobs,
// and the provider keeps at most HoldsPerGPU per sellable GPU (MinHolds at
// least); a quote beyond a cap is answered without a hold.
func TestHoldCaps(t *testing.T) {
	s := newSched(1)
	// Gold reservations in distinct hours all fit one GPU: only the caps
	// bound how many holds they make.
	span := func(k int) Span {
		start := at(time.Duration(k+1) * time.Hour)
		return Span{start, start.Add(time.Hour)}
	}
	for k := range MaxHoldsPerRenter + 1 {
		_, held, err := s.PlanHeld(Holder{Renter: "greedy", JobID: fmt.Sprint("j", k), Nonce: []byte("n")}, 1, auction.Gold, span(k), t0)
		if err != nil {
			t.Fatal(err)
		}
		if want := k < MaxHoldsPerRenter; held != want {
			t.Fatalf("greedy's quote %d: held %v, want %v", k, held, want)
		}
	}
	cap := max(HoldsPerGPU*1, MinHolds)
	for k := MaxHoldsPerRenter + 1; k < 100; k++ {
		_, held, err := s.PlanHeld(Holder{Renter: fmt.Sprint("r", k), JobID: "j", Nonce: []byte("n")}, 1, auction.Gold, span(k), t0)
		if err != nil {
			t.Fatal(err)
		}
		if want := MaxHoldsPerRenter+(k-MaxHoldsPerRenter-1) < cap; held != want {
			t.Fatalf("quote %d: held %v, want %v", k, held, want)
		}
	}
	if n := s.Holds(t0); n != cap {
		t.Fatalf("%d holds, want the cap %d", n, cap)
	}
	// They lapse: a new renter holds again.
	later := t0.Add(DefaultQuoteHold)
	if _, held, _ := s.PlanHeld(Holder{Renter: "greedy", JobID: "again", Nonce: []byte("n")}, 1, auction.Gold, span(200), later); !held {
		t.Fatal("no hold after every hold lapsed")
	}
}

// A claim over GPUs promised to another's live quote displaces no
// newcomer's award: the claim would be refused anyway.
func TestHoldDisplacesNothingForARefusedClaim(t *testing.T) {
	s := newSched(1, WithNewcomerGrace(time.Second))
	if _, err := s.Claim(mkLease("newcomer", auction.Silver, 1, t0, time.Hour), []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(2 * time.Second) // past its grace, unstarted: displaceable
	// A quote names the displaceable GPU and holds it.
	quoteHeld(t, s, "quoted", auction.Silver, 1, now)
	other := mkLease("other", auction.Silver, 1, now, time.Hour)
	s.Establish(other.Renter)
	if acts := s.Displace(other, []int{0}, now); len(acts) != 0 {
		t.Fatalf("displaced %s for a claim the hold refuses", show(acts))
	}
	if acts := s.Displace(mkLease("quoted", auction.Silver, 1, now, time.Hour), []int{0}, now); len(acts) != 1 {
		t.Fatalf("the hold's own award displaced %q, want the newcomer's award", show(acts))
	}
}

// A Kept claim (a lease restored from the provider's records) is never
// refused for a hold.
func TestHoldKeptClaim(t *testing.T) {
	s := newSched(1)
	quoteHeld(t, s, "a", auction.Silver, 1, t0)
	if _, err := s.Claim(mkLease("restored", auction.Silver, 1, t0, time.Hour), []int{0}, t0, Kept()); err != nil {
		t.Fatalf("restored lease: %v", err)
	}
}
