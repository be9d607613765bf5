package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// A bronze job preempted by a silver job on its provider's only GPU comes
// back to that same provider once the silver job ends, resumes from the
// checkpoint it shipped back, and completes; the preemption spends none of
// its re-auctions (it has none) and never excludes the provider. Before,
// the re-auction excluded the provider that preempted it, and the job
// ended no-match ("0 offers known") with its checkpoint dropped.
func TestAPreemptedBronzeJobComesBackToTheProviderThatPreemptedIt(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := startSeller(t, ctx, func(s *offers.Settings) { s.Policy.PreemptNotice = 2 })
	rn := renterOf(t, ctx, prov)
	spec := func(name, tier, sleep, lines string) []byte {
		return []byte("name: " + name + "\nimage: " + demoimage.Tag + "\n" +
			`command: ["-sleep", "` + sleep + `", "-lines", "` + lines + `", "-checkpoint", "/checkpoint"]` + "\n" +
			"checkpoint: {path: /checkpoint}\nresources: {gpus: 1}\ntier: " + tier + "\nmax_price: 3.00\n" +
			"duration: {expected: 1m, max: 5m}\nallow_simulated: true\n")
	}
	victim, err := rn.renterJobs.Submit(spec("victim", "bronze", "20s", "20"), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, victim.ID, 30*time.Second, "the bronze job past its third step", func(j *renting.JobRecord) bool {
		logs, _ := rn.renterJobs.LogsOf(victim.ID)
		return j.State == renting.StateRunning && strings.Contains(string(logs), "step 3")
	})
	silver, err := rn.renterJobs.Submit(spec("silver", "silver", "4s", "2"), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := waitJob(t, rn, victim.ID, 30*time.Second, "the bronze job preempted and waiting", func(j *renting.JobRecord) bool {
		return j.State == renting.StateAuction && strings.Contains(j.Error, "no re-auction spent")
	})
	if ex := w.Explain; ex != nil {
		for _, r := range ex.Rejected {
			if r.Provider == prov.Host().ID().String() && r.Check == "excluded" {
				t.Fatalf("the provider that preempted the job is excluded from its re-auction: %+v", r)
			}
		}
	}
	waitJob(t, rn, silver.ID, 60*time.Second, "the silver job completed", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	freed := time.Now()
	deadline := time.Now().Add(40 * time.Second)
	var done *renting.JobRecord
	var again time.Duration // from the GPU freed to the job running again
	for {
		if done, err = rn.renterJobs.Get(victim.ID); err != nil {
			t.Fatal(err)
		}
		if again == 0 && done.State == renting.StateRunning {
			again = time.Since(freed)
		}
		if renting.Terminal(done.State) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if done.State != renting.StateCompleted || done.Provider != prov.Host().ID().String() || done.Attempts != 2 {
		t.Fatalf("the bronze job ended %s on %s after %d leases (%q); want completed on the provider that preempted it, after 2\nexplain: %+v",
			done.State, done.Provider, done.Attempts, done.Error, done.Explain)
	}
	logs, _ := rn.renterJobs.LogsOf(victim.ID)
	if !strings.Contains(string(logs), "resuming from checkpoint") {
		t.Errorf("the second run did not resume from the checkpoint:\n%s", logs)
	}
	t.Logf("running again %v and completed %v after the silver job freed the GPU", again.Round(100*time.Millisecond), time.Since(freed).Round(100*time.Millisecond))
}
