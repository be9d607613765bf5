package provider

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// burstProviders is the warm-up round of BenchmarkSubmitToLease: five
// providers with eight GPUs each.
func burstProviders() []*Scheduler {
	ps := make([]*Scheduler, 5)
	for i := range ps {
		ps[i] = newSched(8)
	}
	return ps
}

var burstSpan = Span{t0, at(time.Hour)}

// A burst of 40 one-GPU jobs, eight awarded to each provider, every quote
// planned before its award is claimed, in any interleaving of quotes and
// claims and all at one instant: no claim ever races. (Naming the first
// free GPUs in every quote made these collide.)
func TestBurstNeverCollides(t *testing.T) {
	for seed := range 200 {
		r := rand.New(rand.NewPCG(uint64(seed), 9))
		ps := burstProviders()
		owner := r.Perm(40) // job j goes to provider owner[j]/8
		plans := make([][]int, 40)
		var unplanned, unclaimed []int
		for j := range 40 {
			unplanned = append(unplanned, j)
		}
		for len(unplanned)+len(unclaimed) > 0 {
			// Pick any next step: a quote not yet made, or a claim whose
			// quote was made.
			if k := r.IntN(len(unplanned) + len(unclaimed)); k < len(unplanned) {
				j := unplanned[k]
				unplanned = append(unplanned[:k], unplanned[k+1:]...)
				p, err := ps[owner[j]/8].Plan(1, auction.Silver, burstSpan, t0)
				if err != nil {
					t.Fatalf("seed %d: plan of job %d: %v", seed, j, err)
				}
				plans[j] = p
				unclaimed = append(unclaimed, j)
			} else {
				k -= len(unplanned)
				j := unclaimed[k]
				unclaimed = append(unclaimed[:k], unclaimed[k+1:]...)
				l := mkLease(fmt.Sprint("job", j), auction.Silver, 1, t0, time.Hour)
				ps[owner[j]/8].Establish(l.Renter) // its award counts as load
				if _, err := ps[owner[j]/8].Claim(l, plans[j], t0); err != nil {
					t.Fatalf("seed %d: claim of job %d on %v: %v", seed, j, plans[j], err)
				}
			}
		}
		for i, p := range ps {
			if u := p.Utilisation(auction.Silver, t0); u != 1 {
				t.Fatalf("seed %d: provider %d at %v, want all 8 GPUs leased", seed, i, u)
			}
		}
	}
}

// The same burst with real concurrency: 40 goroutines quote and claim at
// once on shared schedulers (run it under -race).
func TestBurstConcurrent(t *testing.T) {
	ps := burstProviders()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for j := range 40 {
		wg.Go(func() {
			p := ps[j%5]
			plan, err := p.Plan(1, auction.Silver, burstSpan, t0)
			if err == nil {
				_, err = p.Claim(mkLease(fmt.Sprint("job", j), auction.Silver, 1, t0, time.Hour), plan, t0)
			}
			if err != nil {
				errs <- fmt.Errorf("job %d: %w", j, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Every job quotes every provider (200 quotes) and each is awarded to a
// random provider with room: claims may race now, but a race is only
// ever answered by another free GPU on the same provider, never by
// "busy" while capacity is free, and all 40 jobs get leases.
func TestBurstRacesFindFreeGPUs(t *testing.T) {
	raced := 0
	for seed := range 50 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		ps := burstProviders()
		quotes := make([][][]int, 40)
		for j := range 40 {
			quotes[j] = make([][]int, 5)
		}
		for _, q := range r.Perm(200) {
			j, p := q/5, q%5
			plan, err := ps[p].Plan(1, auction.Silver, burstSpan, t0)
			if err != nil {
				t.Fatal(err)
			}
			quotes[j][p] = plan
		}
		room := []int{8, 8, 8, 8, 8}
		for _, j := range r.Perm(40) {
			p := r.IntN(5)
			for room[p] == 0 {
				p = (p + 1) % 5
			}
			room[p]--
			plan, l := quotes[j][p], mkLease(fmt.Sprint("job", j), auction.Silver, 1, t0, time.Hour)
			for try := 0; ; try++ {
				_, err := ps[p].Claim(l, plan, t0)
				if err == nil {
					break
				}
				if !errors.Is(err, ErrRaced) || try == 8 {
					t.Fatalf("seed %d: job %d on provider %d: %v after %d tries", seed, j, p, err, try)
				}
				raced++
				if plan, err = ps[p].Plan(1, auction.Silver, burstSpan, t0); err != nil {
					t.Fatalf("seed %d: %v with %d GPUs free", seed, err, room[p]+1)
				}
			}
		}
	}
	t.Logf("%d claims raced in 50 bursts and found another GPU", raced)
}
