package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// The race between a bronze award and a better tier's claim, made to
// happen on real nodes: renter A wins a bronze award, and before A sends
// its start, renter B's silver job claims that provider's one GPU, which
// preempts the award that has not started (the provider settles it for
// nothing and forgets it). A's start is refused ("no active lease"): the
// job is not failed but auctioned again without that provider, without
// spending a re-auction (it has none), and completes on the other one;
// the refused run is charged nothing. The same race is what a service's
// silver floor of one renter and a bronze replica of another meet; within
// one service it cannot happen, since its replicas never share a provider.
func TestABronzeAwardTakenBackBeforeItsStartIsAuctionedAgain(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p1, p2 := startSeller(t, ctx, nil), startSeller(t, ctx, nil)
	byID := map[string]*Node{p1.Host().ID().String(): p1, p2.Host().ID().String(): p2}
	a, b := renterOf(t, ctx, p1, p2), renterOf(t, ctx, p1, p2)
	job := func(name, tier string) []byte {
		return []byte("name: " + name + "\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"1s\", \"-lines\", \"1\"]\n" +
			"resources: {gpus: 1}\ntier: " + tier + "\nmax_price: 1.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\n")
	}

	var once sync.Once
	var first, taker string // the provider of A's first award; B's job
	raced := make(chan error, 1)
	a.renterJobs.InjectBeforeStart(func(id, prov string) {
		once.Do(func() {
			first = prov
			j, err := b.renterJobs.Submit(job("taker", "silver"), nil, renting.SubmitOptions{Provider: prov})
			if err != nil {
				raced <- err
				return
			}
			taker = j.ID
			// Until the provider has given A's award away.
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				held := slices.ContainsFunc(byID[prov].providerJobs.Leases(time.Now()), func(l sched.Info) bool { return l.Lease.JobID == id })
				if !held {
					raced <- nil
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			raced <- fmt.Errorf("the provider still holds A's award 30 s after B's silver job was submitted")
		})
	})
	victim, err := a.renterJobs.Submit(job("victim", "bronze"), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-raced:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("A's job was never awarded")
	}
	done := waitJob(t, a, victim.ID, 60*time.Second, "A's job completed", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	if done.State != renting.StateCompleted {
		t.Fatalf("A's job ended %s: %s", done.State, done.Error)
	}
	if done.Provider == first || done.Attempts != 2 {
		t.Fatalf("A's job completed on %s after %d leases; its first award was on %s", done.Provider, done.Attempts, first)
	}
	if j := waitJob(t, b, taker, 60*time.Second, "B's silver job completed", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) }); j.State != renting.StateCompleted || j.Provider != first {
		t.Fatalf("B's silver job: %s on %s (%s)", j.State, j.Provider, j.Error)
	}
	// A's log of its auctions says why it left the first provider.
	if ex := done.Explain; ex == nil || !slices.ContainsFunc(ex.Rejected, func(r auction.Rejection) bool {
		return strings.Contains(r.Reason, "taken back before it started")
	}) {
		t.Errorf("A's explain does not say why it left %s: %+v", first, done.Explain)
	}
}
