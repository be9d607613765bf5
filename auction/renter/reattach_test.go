package renter

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// What a provider's refusal means depends on what was asked and whether
// the provider was lost before: a first start whose award is gone is not
// started (the renter's slowness, a bronze award taken back, or the
// provider's part); the same words after a loss are the re-attach's to
// weigh; anything else is final.
func TestRefusedMeaning(t *testing.T) {
	cases := []struct {
		name         string
		r            Refusal
		start, again bool
		tier         auction.Tier
		want         RefusalMeaning
		cause        StartCause
	}{
		{"first start displaced", RefusalDisplaced, true, false, auction.Silver, RefusalNotStarted, StartDisplaced},
		{"first bronze start, award gone", RefusalNoLease, true, false, auction.Bronze, RefusalNotStarted, StartTakenBack},
		{"first silver start, award expired", RefusalExpired, true, false, auction.Silver, RefusalNotStarted, StartOther},
		{"first silver start, award gone", RefusalNoLease, true, false, auction.Silver, RefusalNotStarted, StartOther},
		{"start again after a loss, lease gone", RefusalNoLease, true, true, auction.Bronze, RefusalUndecided, StartOther},
		{"attach after a loss: started", RefusalStarted, false, true, auction.Silver, RefusalUndecided, StartOther},
		{"attach after a restart: not running", RefusalNotRunning, false, true, auction.Silver, RefusalUndecided, StartOther},
		{"first attach refused (no loss)", RefusalNoLease, false, false, auction.Silver, RefusalFinal, StartOther},
		{"any other refusal", Refusal("refused"), true, false, auction.Bronze, RefusalFinal, StartOther},
		{"displaced after a loss is final", RefusalDisplaced, false, true, auction.Silver, RefusalFinal, StartOther},
	}
	for _, c := range cases {
		m, cause := Refused(c.r, c.start, c.again, c.tier)
		if m != c.want || cause != c.cause {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, m, cause, c.want, c.cause)
		}
	}
}

func TestReattachBound(t *testing.T) {
	if ReattachBound(false, false) != ReattachFor || ReattachBound(true, false) != ReserveRetry ||
		ReattachBound(false, true) != 0 || ReattachBound(true, true) != 0 {
		t.Fatal("bounds: a job 60 s, a reservation 2 min, a replica none")
	}
}

// The re-attach policy on a manual clock: a lost provider is tried again
// with waits of 1, 2, 4, 8, then 10 s, until the bound from the first
// loss runs out, and never past the lease's last notice; a refusal that
// says the lease started turns to attaching, one that says it does not
// run turns back to starting (at most twice each way); a lease gone
// after a loss gives up at once with the first loss.
func TestReattachOnAManualClock(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	lost := TryEnd{Lost: true, Bound: ReattachFor}

	t.Run("backoff until the bound", func(t *testing.T) {
		p := NewReattach(true, t0.Add(time.Hour))
		now := t0
		var waits []time.Duration
		for range 20 {
			st := p.After(now, lost)
			if st.Do != ReattachAgain {
				if st.Do != ReattachReturnLost {
					t.Fatalf("at %v: %v, want the run given up as lost", now.Sub(t0), st.Do)
				}
				break
			}
			waits = append(waits, st.Wait)
			now = now.Add(st.Wait)
		}
		want := []time.Duration{1, 2, 4, 8, 10, 10, 10, 10, 5}
		if len(waits) != len(want) {
			t.Fatalf("waits %v, want %v seconds", waits, want)
		}
		var sum time.Duration
		for i, w := range want {
			if waits[i] != w*time.Second {
				t.Fatalf("waits %v, want %v seconds", waits, want)
			}
			sum += waits[i]
		}
		if sum != ReattachFor {
			t.Fatalf("came back for %v, want %v", sum, ReattachFor)
		}
		if at, ok := p.Lost(); !ok || !at.Equal(t0) {
			t.Fatalf("lost at %v (%v), want the first loss", at, ok)
		}
	})

	t.Run("never past the lease", func(t *testing.T) {
		p := NewReattach(true, t0.Add(3*time.Second))
		if st := p.After(t0, lost); st.Do != ReattachAgain || st.Left != 3*time.Second || st.Wait != time.Second {
			t.Fatalf("%+v, want a try a second later with 3 s left", st)
		}
		if st := p.After(t0.Add(3*time.Second), lost); st.Do != ReattachReturnLost {
			t.Fatalf("%+v, want given up at the lease's end", st)
		}
	})

	t.Run("a replica is not come back to", func(t *testing.T) {
		p := NewReattach(true, t0.Add(time.Hour))
		if st := p.After(t0, TryEnd{Lost: true, Bound: ReattachBound(false, true)}); st.Do != ReattachReturnLost {
			t.Fatalf("%+v, want given up at once", st)
		}
	})

	t.Run("start and attach on the provider's word, twice at most", func(t *testing.T) {
		p := NewReattach(true, t0.Add(time.Hour))
		if p.Attach(0, false) {
			t.Fatal("the first try with a start sends it")
		}
		if st := p.After(t0, TryEnd{Refusal: RefusalStarted}); st.Do != ReattachAgain || st.Wait != 0 || !p.Attach(1, false) {
			t.Fatalf("%+v: 'started' should turn to attaching at once", st)
		}
		if st := p.After(t0, TryEnd{Refusal: RefusalNotRunning}); st.Do != ReattachAgain || p.Attach(2, false) {
			t.Fatalf("%+v: 'not running' should turn back to starting", st)
		}
		if st := p.After(t0, TryEnd{Refusal: RefusalStarted}); st.Do != ReattachReturn {
			t.Fatalf("%+v: a third switch should end the run as it stands", st)
		}
	})

	t.Run("after a restart, a provider that wants the start again", func(t *testing.T) {
		p := NewReattach(false, t0.Add(time.Hour))
		if !p.Attach(0, false) {
			t.Fatal("without a start, every try attaches")
		}
		if st := p.After(t0, TryEnd{Refusal: RefusalNotRunning}); st.Do != ReattachNoSecrets {
			t.Fatalf("%+v, want the job failed: its start is not held", st)
		}
	})

	t.Run("the lease gone after a loss", func(t *testing.T) {
		p := NewReattach(true, t0.Add(time.Hour))
		if st := p.After(t0, lost); st.Do != ReattachAgain {
			t.Fatalf("%+v", st)
		}
		if st := p.After(t0.Add(time.Second), TryEnd{Refusal: RefusalNoLease}); st.Do != ReattachReturnLost || !st.NoLease {
			t.Fatalf("%+v, want given up with the first loss, the lease gone", st)
		}
	})

	t.Run("a run that ended", func(t *testing.T) {
		p := NewReattach(true, t0.Add(time.Hour))
		if st := p.After(t0, TryEnd{}); st.Do != ReattachReturn {
			t.Fatalf("%+v, want the run over", st)
		}
		if st := p.After(t0, TryEnd{Refusal: RefusalNoLease}); st.Do != ReattachReturn {
			t.Fatalf("%+v: no-lease with no loss before is the run's end", st)
		}
	})
}
