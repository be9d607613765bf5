package node

import (
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// A GPU over the owner's hard limit stops the silver job on it, with its
// notice and a recorded reason, which reaches the renter; over the soft
// limit alone the GPU only leaves the offer and the job runs on.
func TestAHardLimitStopsASilverJob(t *testing.T) {
	r := newHostileRig(t, Options{}, func(s *offers.Settings) {
		s.Limits = attest.Limits{MaxTempC: 80, StopTempC: 90}
	})
	sim, ok := r.prov.gpus.(*attest.Simulated)
	if !ok {
		t.Fatalf("the provider's GPUs are %T, want simulated", r.prov.gpus)
	}
	rn := renterOf(t, r.ctx, r.prov)
	spec := "name: hot\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"5m\"]\nresources: {gpus: 1}\ntier: silver\n" +
		"max_price: 1.00\nduration: {expected: 5m, max: 10m}\nallow_simulated: true\nretry: {max_reauctions: 0}\n"
	j, err := rn.renterJobs.Submit([]byte(spec), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, j.ID, 30*time.Second, "running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	if err := sim.SetLoad(0, 85, 300, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the GPU withdrawn over the soft limit", func() bool { return r.prov.provider.Current() == nil })
	time.Sleep(3 * time.Second) // more than a monitor poll
	if j, _ := rn.renterJobs.Get(j.ID); j.State != renting.StateRunning {
		t.Fatalf("over the soft limit the silver job is %s (%s), want running", j.State, j.Error)
	}
	if err := sim.SetLoad(0, 95, 300, nil); err != nil {
		t.Fatal(err)
	}
	// Stopped, and auctioned again (a preemption spends no re-auction),
	// the hard limit named while it waits for a GPU.
	done := waitJob(t, rn, j.ID, 30*time.Second, "stopped by the hard limit", func(j *renting.JobRecord) bool {
		return j.State == renting.StateAuction && strings.Contains(j.Error, "hard limit")
	})
	if done.Attempts != 1 {
		t.Fatalf("the job stopped by the hard limit shows %d leases, want 1", done.Attempts)
	}
}
