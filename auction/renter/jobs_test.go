package renter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/provider"
)

// Every path of a job, whole, in virtual time (jobs_harness_test.go): the
// providers each table row scripts, the outcome, where it ran, what each
// start resumed from, and what was charged.
func TestJobPaths(t *testing.T) {
	type row struct {
		name    string
		reauct  int
		floors  []auction.Credits // one provider each, 1 GPU, cheapest first
		setup   func(h *jobHarness, ps []*fakeProvider)
		crashes []time.Duration
		outcome Outcome
		why     string   // a substring of the outcome's Why
		leased  []string // provider letters, in order: a is the first floor's
		ckpts   []string // each start's checkpoint, in order
		check   func(t *testing.T, h *jobHarness, ps []*fakeProvider)
	}
	rows := []row{
		{name: "completes, charged within the bound, the rest refunded", floors: []auction.Credits{1_000_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runCompletes, after: 12 * time.Minute})
			},
			outcome: OutcomeCompleted, leased: []string{"a"}, ckpts: []string{""},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				s := h.last
				if s == nil || s.check.Disputed || s.paid != PacingOf(h.leaseOn(t, 0)).Total(3) || s.check.Refunded != s.paid-s.charged || s.charged <= 0 {
					t.Fatalf("settlement %+v, want three vouchers paid, the 12 minutes charged and the rest refunded", s)
				}
			}},
		{name: "an award lost to a race falls back to the next bid", floors: []auction.Credits{1_000_000, 1_200_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				once := false
				ps[0].afterQuote = func(string) { // another renter's award takes the GPU between quote and award
					ps[0].mu.Lock()
					defer ps[0].mu.Unlock()
					if !once {
						once, ps[0].used[ps[0].gpus[0]] = true, "someone-else"
					}
				}
			},
			outcome: OutcomeCompleted, leased: []string{"b"}, ckpts: []string{""},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				if _, awards, _ := ps[0].counts(); awards != 1 {
					t.Errorf("the cheaper provider was awarded %d times, want once (refused as raced)", awards)
				}
			}},
		{name: "preempted, back to the same provider once it is free, from the checkpoint", floors: []auction.Credits{1_000_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runPreempts, after: 10 * time.Minute, ckpt: []byte("step-600"), busy: 40 * time.Second})
			},
			outcome: OutcomeCompleted, leased: []string{"a", "a"}, ckpts: []string{"", "step-600"},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				if gap := h.runs.starts[1].at.Sub(h.runs.starts[0].at); gap < 10*time.Minute+40*time.Second || gap > 10*time.Minute+time.Minute {
					t.Errorf("started again %v after the first start, want just after the 40 s the GPU was busy", gap-10*time.Minute)
				}
			}},
		{name: "preempted, to another provider while the first stays busy", floors: []auction.Credits{1_000_000, 1_500_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runPreempts, after: 10 * time.Minute, ckpt: []byte("step-600"), busy: 2 * time.Hour})
			},
			outcome: OutcomeCompleted, leased: []string{"a", "b"}, ckpts: []string{"", "step-600"}},
		{name: "the provider lost: auctioned again without it, a re-auction spent", reauct: 1, floors: []auction.Credits{1_000_000, 1_500_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runLost, after: 5 * time.Minute})
			},
			outcome: OutcomeCompleted, leased: []string{"a", "b"}, ckpts: []string{"", ""}},
		{name: "the provider lost with no re-auction left fails", floors: []auction.Credits{1_000_000, 1_500_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runLost, after: 5 * time.Minute})
			},
			outcome: OutcomeFailed, why: "no re-auctions left of 0", leased: []string{"a"}, ckpts: []string{""}},
		{name: "a failed pull ends failed naming the image, nothing charged", reauct: 3, floors: []auction.Credits{1_000_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runPullFails})
			},
			outcome: OutcomeFailed, why: `could not pull the image "registry.example/team/train:1.4"`, leased: []string{"a"}, ckpts: []string{""},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				if s := h.last; s == nil || s.charged != 0 || s.paid != 0 {
					t.Errorf("a run that never started settled %+v, want nothing paid or charged", s)
				}
			}},
		{name: "a failed start goes to the next provider, spending nothing", floors: []auction.Credits{1_000_000, 1_500_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runStartFails})
			},
			outcome: OutcomeCompleted, leased: []string{"a", "b"}, ckpts: []string{"", ""}},
		{name: "a renter restarted mid-run re-attaches: one run, no second start", floors: []auction.Credits{1_000_000},
			crashes: []time.Duration{7 * time.Minute},
			outcome: OutcomeCompleted, leased: []string{"a"}, ckpts: []string{""},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				if h.restarted != 1 || len(h.runs.starts) != 1 || h.last == nil || h.last.paid != PacingOf(h.leaseOn(t, 0)).Total(4) {
					t.Errorf("%d restarts, %d starts, settled %+v; want 1, 1 and four vouchers paid across the restart", h.restarted, len(h.runs.starts), h.last)
				}
			}},
		{name: "a renter restarted while its preempted job waits auctions it again from its checkpoint", floors: []auction.Credits{1_000_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runPreempts, after: 10 * time.Minute, ckpt: []byte("step-600"), busy: 5 * time.Minute})
			},
			crashes: []time.Duration{12 * time.Minute},
			outcome: OutcomeCompleted, leased: []string{"a", "a"}, ckpts: []string{"", "step-600"},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				if h.restarted != 1 {
					t.Errorf("%d restarts, want 1", h.restarted)
				}
			}},
		{name: "unpaid: the provider stops the job, charging no more than was paid", floors: []auction.Credits{1_000_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runCompletes, after: time.Hour, unpaidAfter: 2})
			},
			outcome: OutcomeFailed, why: "unpaid", leased: []string{"a"}, ckpts: []string{""},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				s, pace := h.last, PacingOf(h.leaseOn(t, 0))
				if s == nil || s.paid != pace.Total(2) || s.charged != s.paid || s.check.Disputed {
					t.Errorf("settled %+v, want the two vouchers paid charged, undisputed", s)
				}
			}},
		{name: "a charge above what the run allows is disputed", floors: []auction.Credits{1_000_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runOvercharges, after: 7 * time.Minute})
			},
			outcome: OutcomeCompleted, leased: []string{"a"}, ckpts: []string{""},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				s := h.last
				if s == nil || !s.check.Disputed || s.check.Refunded != 0 || s.charged <= s.bound || !strings.Contains(s.check.Why, "disputed") {
					t.Errorf("settled %+v, want the charge of every voucher for 7 minutes disputed", s)
				}
			}},
		{name: "cancelled by the renter mid-run: ended at once, charged for what ran", floors: []auction.Credits{1_000_000},
			setup:   func(h *jobHarness, ps []*fakeProvider) { h.cancelAfter = 7 * time.Minute },
			outcome: OutcomeCancelled, why: "cancelled", leased: []string{"a"}, ckpts: []string{""},
			check: func(t *testing.T, h *jobHarness, ps []*fakeProvider) {
				l := h.leaseOn(t, 0)
				if s := h.last; s == nil || s.check.Disputed || s.charged != provider.Cost(l, 7*time.Minute) || s.paid != PacingOf(l).Total(2) {
					t.Errorf("settled %+v, want 7 minutes charged of the two vouchers paid", s)
				}
			}},
		{name: "a retryable exit spends a re-auction and leaves the provider", reauct: 1, floors: []auction.Credits{1_000_000, 1_500_000},
			setup: func(h *jobHarness, ps []*fakeProvider) {
				h.runs.script(ps[0], runScript{kind: runRetryExit, after: time.Minute})
			},
			outcome: OutcomeCompleted, leased: []string{"a", "b"}, ckpts: []string{"", ""}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			spec := lifeSpec(r.reauct)
			h := newJobHarness(t, newManualClock(t0), spec, 1, r.floors...)
			ps := h.m.providers
			if r.setup != nil {
				r.setup(h, ps)
			}
			st := h.run(t, r.crashes...)
			if !st.Done || st.Outcome != r.outcome || !strings.Contains(st.Why, r.why) {
				t.Fatalf("outcome %+v, want %v with %q", st, r.outcome, r.why)
			}
			var leased []string
			for _, p := range h.leased {
				leased = append(leased, h.letter(p))
			}
			var ckpts []string
			for _, s := range h.runs.starts {
				ckpts = append(ckpts, string(s.ckpt))
			}
			if !slices.Equal(leased, r.leased) || !slices.Equal(ckpts, r.ckpts) {
				t.Fatalf("leased on %v resuming from %q, want %v from %q", leased, ckpts, r.leased, r.ckpts)
			}
			if len(h.runs.twice) > 0 || len(h.excluded) > 0 {
				t.Fatalf("ran twice at once: %v; a preemptor excluded: %v", h.runs.twice, h.excluded)
			}
			if r.check != nil {
				r.check(t, h, ps)
			}
		})
	}
}

// letter names a provider of the harness's market: a, b, ... by floor.
func (h *jobHarness) letter(provider string) string {
	for i, p := range h.m.providers {
		if p.id == provider {
			return string(rune('a' + i))
		}
	}
	return provider
}

// leaseOn is the i'th start's lease, as the provider received it.
func (h *jobHarness) leaseOn(t *testing.T, i int) *auction.Lease {
	t.Helper()
	if i >= len(h.runs.starts) {
		t.Fatalf("no start %d of %d", i, len(h.runs.starts))
	}
	return h.runs.leases[i]
}

// Properties over random markets and scripts, on a fixed list of seeds so
// that a failure is reproducible: a job never runs twice at once, every
// start resumes from the latest checkpoint shipped before it, a preempted
// job is never excluded for the preemption, and every job ends with a
// typed outcome within bounded runs and virtual time, across renter
// restarts at random moments.
func TestJobProperties(t *testing.T) {
	kinds := []runKind{runCompletes, runPreempts, runPreempts, runLost, runPullFails, runStartFails, runRetryExit, runOvercharges}
	outcomes := map[Outcome]int{}
	restarts, preemptions := 0, 0
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 30))
		floors := make([]auction.Credits, 1+rng.IntN(4))
		for i := range floors {
			floors[i] = auction.Credits(800_000 + 100_000*rng.IntN(10))
		}
		h := newJobHarness(t, newManualClock(t0), lifeSpec(rng.IntN(3)), 1, floors...)
		for _, p := range h.m.providers {
			for n := range 1 + rng.IntN(6) {
				s := runScript{kind: kinds[rng.IntN(len(kinds))], after: time.Duration(1+rng.IntN(30)) * time.Minute}
				if s.kind == runPreempts {
					s.busy = time.Duration(rng.IntN(40)) * time.Minute
					if rng.IntN(3) > 0 {
						s.ckpt = fmt.Appendf(nil, "%s-%d", p.id[len(p.id)-4:], n)
					}
				}
				if rng.IntN(10) == 0 {
					s.unpaidAfter = uint64(1 + rng.IntN(3))
				}
				h.runs.script(p, s)
			}
		}
		var crashes []time.Duration
		for range rng.IntN(4) {
			crashes = append(crashes, time.Duration(1+rng.IntN(60))*time.Minute)
		}
		slices.Sort(crashes)
		var st Step
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			st = h.run(t, crashes...)
			if !st.Done || st.Outcome < OutcomeCompleted || st.Outcome > OutcomeCancelled {
				t.Fatalf("no typed outcome: %+v after %d runs", st, h.runsSeen)
			}
			if len(h.runs.twice) > 0 {
				t.Fatalf("a job ran twice at once: %v", h.runs.twice)
			}
			if len(h.excluded) > 0 {
				t.Fatalf("excluded for a preemption: %v", h.excluded)
			}
			for i, s := range h.runs.starts {
				if want := h.runs.shippedBefore(s.at); string(s.ckpt) != string(want) {
					t.Fatalf("start %d resumed from %q, want the latest checkpoint shipped before it, %q", i, s.ckpt, want)
				}
			}
			for _, c := range h.runs.charges {
				if !c.check.Disputed && (c.charged > c.bound || c.check.Refunded != c.paid-c.charged) {
					t.Fatalf("an undisputed charge above its bound: %+v", c)
				}
			}
		})
		outcomes[st.Outcome]++
		restarts += h.restarted
		for _, s := range h.runs.starts {
			if len(s.ckpt) > 0 {
				preemptions++
			}
		}
	}
	t.Logf("outcomes %v, %d restarts, %d starts from a checkpoint", outcomes, restarts, preemptions)
	if outcomes[OutcomeCompleted] == 0 || outcomes[OutcomeFailed] == 0 || restarts == 0 || preemptions == 0 {
		t.Errorf("the properties were hardly exercised: outcomes %v, %d restarts, %d resumed starts", outcomes, restarts, preemptions)
	}
}
