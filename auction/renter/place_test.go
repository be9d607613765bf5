package renter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// drive runs f on a manual clock inside a synctest bubble: whenever every
// goroutine is blocked, it advances the clock to the earliest sleeper, and
// it returns the advances made once f has returned. Nothing really sleeps.
func drive(t *testing.T, clock *manualClock, f func()) []time.Duration {
	t.Helper()
	var steps []time.Duration
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		for {
			synctest.Wait()
			select {
			case <-done:
				return
			default:
			}
			d, ok := clock.next()
			if !ok {
				t.Fatal("deadlock: nothing sleeps on the clock and f has not returned")
			}
			steps = append(steps, d)
			clock.advance(d)
		}
	})
	return steps
}

func TestPlaceBackoffIsExactInVirtualTime(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 8, 1_000_000, 1_200_000)
	for _, p := range m.providers {
		p.decline = auction.ReasonBusy
	}
	a := m.auctioneer(t)
	var notes []string
	var res Result
	var err error
	steps := drive(t, clock, func() {
		res, err = a.Place(context.Background(), request(t, "job-1", testSpec()), Policy{
			MaxReauctions: 7,
			Progress:      func(p Progress) { notes = append(notes, p.String()) },
		})
	})
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(steps, want) {
		t.Errorf("waited %v, want %v", steps, want)
	}
	if !errors.Is(err, ErrNoMatch) || res.Attempt != 7 || clock.Now().Sub(t0) != 91*time.Second {
		t.Errorf("after %s: attempt %d, err %v; want no match after 7 re-auctions at 91s", clock.Now().Sub(t0), res.Attempt, err)
	}
	if q, _, _ := m.providers[0].counts(); q != 8 {
		t.Errorf("%d rounds, want 8", q)
	}
	wantNote := "no provider matched: 2 feasible offers, no acceptable bid; retrying in 4s (3 of 7)"
	if len(notes) != 7 || notes[2] != wantNote {
		t.Errorf("progress %q, want 7 notes, the third %q", notes, wantNote)
	}
}

func TestPlaceBackoffContinuesFromAttempt(t *testing.T) {
	for _, c := range []struct {
		pol  Policy
		want []time.Duration
	}{
		{Policy{MaxReauctions: 4, Attempt: 2}, []time.Duration{4 * time.Second, 8 * time.Second}},
		{Policy{MaxReauctions: 3, Backoff: 10 * time.Millisecond, MaxBackoff: 25 * time.Millisecond},
			[]time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond}},
		{Policy{MaxReauctions: 0}, nil},
	} {
		t.Run(fmt.Sprint(c.pol.Attempt, c.pol.MaxReauctions), func(t *testing.T) {
			clock := newManualClock(t0)
			spec := testSpec()
			spec.MaxPrice = 1 // nothing feasible: no quotes, only the backoff sleeps
			a := newMarket(t, clock, 8, 1_000_000).auctioneer(t)
			var res Result
			steps := drive(t, clock, func() { res, _ = a.Place(context.Background(), request(t, "job-1", spec), c.pol) })
			if !slices.Equal(steps, c.want) || !slices.Equal(clock.slept, c.want) || res.Attempt != c.pol.MaxReauctions {
				t.Errorf("waited %v (slept %v), attempt %d; want %v, attempt %d", steps, clock.slept, res.Attempt, c.want, c.pol.MaxReauctions)
			}
		})
	}
}

func TestPlaceStopsWhenCancelledDuringBackoff(t *testing.T) {
	clock := newManualClock(t0)
	spec := testSpec()
	spec.MaxPrice = 1
	a := newMarket(t, clock, 8, 1_000_000).auctioneer(t)
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	synctest.Test(t, func(t *testing.T) {
		go func() { _, err = a.Place(ctx, request(t, "job-1", spec), Policy{MaxReauctions: 5}) }()
		synctest.Wait() // in the first backoff
		cancel()
		synctest.Wait()
	})
	if !errors.Is(err, context.Canceled) || clock.Now() != t0 {
		t.Fatalf("err %v at %s, want cancelled with no time passed", err, clock.Now())
	}
}

func TestPlaceRequotesAtOnceAfterARace(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 2, 1_000_000, 1_200_000) // the interlopers take one of two GPUs each
	a := racedAfterQuote(t, m, "victim")
	var res Result
	var err error
	var notes int
	steps := drive(t, clock, func() {
		res, err = a.Place(context.Background(), request(t, "victim", testSpec()), Policy{
			Rand: rand.New(rand.NewPCG(1, 2)), Progress: func(Progress) { notes++ },
		})
	})
	if err != nil || res.Attempt != 0 || notes != 0 {
		t.Fatalf("err %v, attempt %d, %d progress notes; want a lease without a re-auction", err, res.Attempt, notes)
	}
	if len(steps) != 1 || steps[0] < 20*time.Millisecond || steps[0] >= 100*time.Millisecond {
		t.Errorf("waited %v before the re-quote, want one jitter in [20ms, 100ms)", steps)
	}
	if res.Lease.Provider != m.providers[0].id || !slices.Equal(res.Lease.GPUUUIDHash, m.providers[0].gpus[1:]) {
		t.Errorf("lease with %s on %v, want the first provider's second GPU", res.Lease.Provider, res.Lease.GPUUUIDHash)
	}
}

func TestAuctionQuoteDeadlineInVirtualTime(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 8, 1_000_000, 1_200_000)
	m.providers[0].hang = true
	a := m.auctioneer(t)
	var res Result
	var err error
	steps := drive(t, clock, func() { res, err = a.Auction(context.Background(), request(t, "job-1", testSpec())) })
	if err != nil || res.Lease.Provider != m.providers[1].id {
		t.Fatalf("err %v; want the provider that answered to win", err)
	}
	if !slices.Equal(steps, []time.Duration{DefaultQuoteDeadline}) || res.Explain.Quotes[0].Error != errQuoteDeadline.Error() {
		t.Errorf("waited %v, silent provider's outcome %+v; want cut off after 3s", steps, res.Explain.Quotes[0])
	}
}

// TestPlaceBurst: 40 jobs at once from 15 renters onto 5 providers with 8
// GPUs each, which
// name the first free GPUs in every quote as node's provider does, so that
// concurrent awards race. Every job gets a lease without a re-auction (the
// spec allows none), no GPU is leased twice, and capacity ends full.
func TestPlaceBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the wall clock, in a bubble: the jitter takes no real time
		m := newMarket(t, Wall, 8, 1_000_000, 1_000_000, 1_100_000, 1_200_000, 1_300_000)
		const jobs = 40
		type placed struct {
			res Result
			err error
		}
		out := make(chan placed, jobs)
		renters := make([]*Auctioneer, 15)
		for i := range renters {
			key, id := testKey(t, int64(renterSeed+i))
			m.renter = Identity{Peer: id, Network: testNetwork, Key: key}
			renters[i] = m.auctioneer(t)
		}
		for i := range jobs {
			a := renters[i%len(renters)]
			go func() {
				res, err := a.Place(context.Background(), request(t, fmt.Sprintf("job-%02d", i), testSpec()),
					Policy{Rand: rand.New(rand.NewPCG(uint64(i), 7))})
				out <- placed{res, err}
			}()
		}
		gpus := map[string]string{}
		races, worst := 0, 0
		for range jobs {
			p := <-out
			races, worst = races+p.res.Races, max(worst, p.res.Races)
			if p.err != nil {
				t.Errorf("no lease while capacity is free: %v", p.err)
				continue
			}
			for _, h := range p.res.Lease.GPUUUIDHash {
				if j, dup := gpus[h]; dup {
					t.Errorf("GPU %s leased to %s and %s", h, j, p.res.Lease.JobID)
				}
				gpus[h] = p.res.Lease.JobID
			}
		}
		for _, p := range m.providers {
			if _, _, used := p.counts(); used != 8 {
				t.Errorf("provider %s leased %d of 8 GPUs", p.id, used)
			}
		}
		t.Logf("%d immediate re-quotes after lost races, at most %d for one job", races, worst)
	})
}

// A re-auction is patient: rounds without a match spend no re-auction
// until the waits add up to Patience (1, 2, 4, 8 s, then the 10 s step,
// the last cut to what is left of the minute); only then does the
// backoff that spends them resume where the job's attempts left it.
func TestPlacePatienceSpendsNoReauctionUntilItIsUsedUp(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 8, 1_000_000, 1_200_000)
	for _, p := range m.providers {
		p.decline = auction.ReasonBusy
	}
	a := m.auctioneer(t)
	var notes []Progress
	var res Result
	var err error
	steps := drive(t, clock, func() {
		res, err = a.Place(context.Background(), request(t, "job-1", testSpec()), Policy{
			MaxReauctions: 2, Attempt: 1, Patience: DefaultPatience,
			Progress: func(p Progress) { notes = append(notes, p) },
		})
	})
	want := []time.Duration{1, 2, 4, 8, 10, 10, 10, 10, 5, 2}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(steps, want) {
		t.Errorf("waited %v, want %v", steps, want)
	}
	if !errors.Is(err, ErrNoMatch) || res.Attempt != 2 || clock.Now().Sub(t0) != 62*time.Second {
		t.Errorf("after %s: attempt %d, err %v; want no match with 2 re-auctions spent at 62s", clock.Now().Sub(t0), res.Attempt, err)
	}
	if q, _, _ := m.providers[0].counts(); q != 11 {
		t.Errorf("%d rounds, want 11", q)
	}
	if len(notes) != 10 {
		t.Fatalf("%d progress notes, want 10", len(notes))
	}
	for i, p := range notes[:9] {
		if !p.Patient || p.Reauction != 2 {
			t.Errorf("note %d: %+v, want a patient round before re-auction 2", i, p)
		}
	}
	wantNote := "no provider matched: 2 feasible offers, no acceptable bid; retrying in 4s: offers may not have caught up (7s of 1m0s waited, no re-auction spent)"
	if got := notes[2].String(); got != wantNote {
		t.Errorf("third note %q, want %q", got, wantNote)
	}
	if got, want := notes[9].String(), "no provider matched: 2 feasible offers, no acceptable bid; retrying in 2s (2 of 2)"; notes[9].Patient || got != want {
		t.Errorf("last note %q (patient %v), want %q", got, notes[9].Patient, want)
	}
}

// A provider that frees its GPUs while a re-auction is patient gets the
// job on the next round, and the waits spent no re-auction: the case of a
// preempted bronze job whose other provider finishes a job a few seconds
// later, which without patience ended no-match two seconds after the
// preemption.
func TestPlacePatienceLeasesOnceAProviderFreesUp(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 8, 1_000_000)
	m.providers[0].decline = auction.ReasonBusy
	a := m.auctioneer(t)
	var res Result
	var err error
	steps := drive(t, clock, func() {
		res, err = a.Place(context.Background(), request(t, "job-1", testSpec()), Policy{
			MaxReauctions: 2, Attempt: 1, Patience: DefaultPatience,
			Progress: func(p Progress) {
				if p.Waited >= 7*time.Second { // the provider is free by the round after this wait
					m.providers[0].decline = ""
				}
			},
		})
	})
	if err != nil || res.Attempt != 1 || res.Lease.Provider != m.providers[0].id {
		t.Fatalf("err %v, attempt %d; want a lease with no re-auction spent", err, res.Attempt)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(steps, want) {
		t.Errorf("waited %v, want %v", steps, want)
	}
}

// Without patience nothing changes (a new job), and patience never delays
// a round that finds a match, nor is it spent on anything but rounds
// without one.
func TestPlacePatientWait(t *testing.T) {
	for _, c := range []struct {
		pol     Policy
		patient int
		waited  time.Duration
		want    time.Duration
	}{
		{Policy{}, 0, 0, 0},
		{Policy{Patience: time.Minute}, 0, 0, time.Second},
		{Policy{Patience: time.Minute}, 3, 7 * time.Second, 8 * time.Second},
		{Policy{Patience: time.Minute}, 4, 15 * time.Second, 10 * time.Second},
		{Policy{Patience: time.Minute}, 8, 55 * time.Second, 5 * time.Second},
		{Policy{Patience: time.Minute}, 9, time.Minute, 0},
		{Policy{Patience: 30 * time.Second, Backoff: 5 * time.Second, PatienceStep: 20 * time.Second}, 1, 5 * time.Second, 10 * time.Second},
		{Policy{Patience: 30 * time.Second, Backoff: 5 * time.Second, PatienceStep: 20 * time.Second}, 2, 15 * time.Second, 15 * time.Second},
		{Policy{Patience: time.Hour, Backoff: 5 * time.Minute, PatienceBackoff: time.Second, PatienceStep: 5 * time.Minute}, 0, 0, time.Second},
		{Policy{Patience: time.Hour, Backoff: 5 * time.Minute, PatienceBackoff: time.Second, PatienceStep: 5 * time.Minute}, 4, 15 * time.Second, 16 * time.Second},
		{Policy{Patience: time.Hour, Backoff: 5 * time.Minute, PatienceBackoff: time.Second, PatienceStep: 5 * time.Minute}, 12, 20 * time.Minute, 5 * time.Minute},
	} {
		if got := c.pol.patientWait(c.patient, c.waited); got != c.want {
			t.Errorf("%+v after %d patient rounds (%s): wait %s, want %s", c.pol, c.patient, c.waited, got, c.want)
		}
	}
}
