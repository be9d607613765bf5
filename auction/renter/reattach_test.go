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
		// The provider refuses a bronze start that comes inside its notice
		// before the owner's window closes (auction/provider's start) as
		// expired: nothing ran, the job is auctioned again at once.
		{"first bronze start, award expired", RefusalExpired, true, false, auction.Bronze, RefusalNotStarted, StartTakenBack},
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
	if ReattachBound(false, false, false) != ReattachFor || ReattachBound(true, false, false) != ReserveRetry ||
		ReattachBound(false, true, false) != 0 || ReattachBound(true, true, false) != 0 {
		t.Fatal("bounds: a job 60 s, a reservation 2 min, a replica none")
	}
	// A relayed connection changes nothing but a replica's: a relay's
	// circuit reset is no sign of a lost provider.
	if ReattachBound(false, false, true) != ReattachFor || ReattachBound(true, false, true) != ReserveRetry ||
		ReattachBound(false, true, true) != ReplicaRelayedFor || ReattachBound(true, true, true) != ReplicaRelayedFor {
		t.Fatal("bounds over a relay: a job 60 s, a reservation 2 min, a replica ReplicaRelayedFor")
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
		if st := p.After(t0, TryEnd{Lost: true, Bound: ReattachBound(false, true, false)}); st.Do != ReattachReturnLost {
			t.Fatalf("%+v, want given up at once", st)
		}
	})

	t.Run("a replica reached through a relay is come back to, briefly", func(t *testing.T) {
		p := NewReattach(true, t0.Add(time.Hour))
		b := ReattachBound(false, true, true)
		if st := p.After(t0, TryEnd{Lost: true, Bound: b}); st.Do != ReattachAgain || st.Wait != time.Second || st.Left != ReplicaRelayedFor {
			t.Fatalf("%+v, want a try a second later with %v left", st, ReplicaRelayedFor)
		}
		if st := p.After(t0.Add(ReplicaRelayedFor), TryEnd{Lost: true, Bound: b}); st.Do != ReattachReturnLost {
			t.Fatalf("%+v, want given up %v after the loss", st, ReplicaRelayedFor)
		}
	})

	t.Run("a loss after the provider was heard again has its own bound", func(t *testing.T) {
		// A replica through a relay whose circuits last 15 s: lost at
		// t0, re-attached (the provider sends the job's events), lost
		// again at the next reset, 16 s later, past the first loss's
		// bound: it is come back to again, from the second loss.
		b := ReattachBound(false, true, true)
		p := NewReattach(true, t0.Add(time.Hour))
		if st := p.After(t0, TryEnd{Lost: true, Bound: b}); st.Do != ReattachAgain {
			t.Fatalf("%+v, want a try", st)
		}
		again := t0.Add(ReplicaRelayedFor + time.Second)
		st := p.After(again, TryEnd{Lost: true, Heard: true, Bound: b})
		if st.Do != ReattachAgain || st.Wait != time.Second || st.Left != ReplicaRelayedFor {
			t.Fatalf("%+v, want a try a second later with the whole %v left", st, ReplicaRelayedFor)
		}
		if at, lost := p.Lost(); !lost || !at.Equal(again) {
			t.Fatalf("lost at %v (%v), want the second loss, %v", at, lost, again)
		}
		// Without the provider heard in between, the first loss's bound
		// holds: a provider that keeps failing is given up.
		p = NewReattach(true, t0.Add(time.Hour))
		p.After(t0, TryEnd{Lost: true, Bound: b})
		if st := p.After(again, TryEnd{Lost: true, Bound: b}); st.Do != ReattachReturnLost {
			t.Fatalf("%+v, want given up: never heard since the first loss", st)
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

	// Issue 37: a relay resets the stream every few seconds (its
	// circuits' limit), from the image's pull to the job's end. Each
	// loss after the provider was heard again has its own bound: the
	// run is not given up a bound after its first loss while every
	// re-attach succeeds.
	t.Run("a loss after the provider was heard again is a new one", func(t *testing.T) {
		p := NewReattach(true, t0.Add(time.Hour))
		// Lost in the pull phase: the start sent again is refused as
		// started, and the run attached to.
		if st := p.After(t0, lost); st.Do != ReattachAgain || st.Left != ReattachFor {
			t.Fatalf("the first loss: %+v", st)
		}
		if st := p.After(t0.Add(time.Second), TryEnd{Refusal: RefusalStarted}); st.Do != ReattachAgain || st.Wait != 0 || !p.Attach(2, false) {
			t.Fatalf("%+v: 'started' should turn to attaching", st)
		}
		// Each attach is answered and followed until the next reset, 30 s
		// later, for five minutes: each loss has the whole bound.
		now := t0.Add(time.Second)
		for i := range 10 {
			now = now.Add(30 * time.Second)
			st := p.After(now, TryEnd{Lost: true, Heard: true, Bound: ReattachFor})
			if st.Do != ReattachAgain || st.Wait != time.Second || st.Left != ReattachFor {
				t.Fatalf("loss %d, %v after the first: %+v, want a try a second later with the whole bound left", i+2, now.Sub(t0), st)
			}
			if at, _ := p.Lost(); !at.Equal(now) {
				t.Fatalf("loss %d: lost at %v, want %v", i+2, at, now)
			}
			now = now.Add(st.Wait)
		}
		// Silent for a whole bound after it was last heard: given up.
		for {
			st := p.After(now, lost)
			if st.Do == ReattachReturnLost {
				break
			}
			if st.Do != ReattachAgain {
				t.Fatalf("%+v, want tries until the bound", st)
			}
			now = now.Add(st.Wait)
		}
		if at, _ := p.Lost(); now.Sub(at) != ReattachFor {
			t.Fatalf("given up %v after the last loss, want %v", now.Sub(at), ReattachFor)
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
