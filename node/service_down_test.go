package node

import (
	"context"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// service down cancels every replica job of its service (cancelJobs). A
// replica that had already ended, whose provider answers that it holds
// no such lease, is not asked again: asking it five more times, a second
// apart and more, made service down take 15 s. A replica whose provider
// cannot be reached (lost, maybe mid-pull, its container perhaps going
// on) is still told again for as long as before.
func TestCancelJobsAsksAProviderThatAnsweredOnce(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := startSeller(t, ctx, nil), startSeller(t, ctx, nil)
	rn := renterOf(t, ctx, a, b)
	spec := func(name, sleep string) []byte {
		return []byte("name: " + name + "\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"" + sleep + "\", \"-lines\", \"1\"]\n" +
			"resources: {gpus: 1}\ntier: silver\nmax_price: 1.00\nduration: {expected: 1m, max: 10m}\nallow_simulated: true\nretry: {max_reauctions: 0}\n")
	}

	ended, err := rn.renterJobs.Submit(spec("ended", "0s"), nil, renting.SubmitOptions{Provider: a.Host().ID().String()})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, ended.ID, time.Minute, "the job completed", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	start := time.Now()
	rn.renterServices.CancelJobs([]string{ended.ID})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("cancelling a job that had ended took %v, want at most 3 s (its provider answered that it holds no such lease)", took.Round(100*time.Millisecond))
	} else {
		t.Logf("a job that had ended: %v", took.Round(time.Millisecond))
	}

	lost, err := rn.renterJobs.Submit(spec("lost", "5m"), nil, renting.SubmitOptions{Provider: b.Host().ID().String()})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, lost.ID, time.Minute, "the job running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	crashNode(t, b)
	start = time.Now()
	rn.renterServices.CancelJobs([]string{lost.ID})
	if took := time.Since(start); took < 10*time.Second {
		t.Errorf("a provider that cannot be reached was given up after %v: it must be told again for 15 s", took.Round(100*time.Millisecond))
	} else {
		t.Logf("a provider that cannot be reached: told again for %v", took.Round(100*time.Millisecond))
	}
	if j, _ := rn.renterJobs.Get(lost.ID); j.State != renting.StateCancelled {
		t.Errorf("the job whose provider was lost is %s, want cancelled", j.State)
	}
}
