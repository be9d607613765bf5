package node

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
)

// A renter that restarts while its job runs goes on paying on the stream
// it attaches with, and the provider counts those vouchers: the job runs
// to its end instead of being paused and stopped as unpaid once what the
// first stream paid for has run out (here after a few 2 s intervals).
func TestARestartedRenterKeepsPaying(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, nil)
	rn := startTestNode(t, r.ctx, "", Options{BillingInterval: 2 * time.Second})
	if err := rn.Host().LibP2P().Connect(r.ctx, addrInfo(r.prov.Host())); err != nil {
		t.Fatal(err)
	}
	id, rn := runThenRestartRenter(t, r, rn, "paying", "16s")
	if err := rn.Host().LibP2P().Connect(r.ctx, addrInfo(r.prov.Host())); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, rn, id, 60*time.Second, "completed after the restart", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	if done.Attempts != 1 || done.Vouchers < 3 {
		t.Errorf("completed with %d attempts and %d vouchers after the restart, want 1 and the vouchers of the rest of the run", done.Attempts, done.Vouchers)
	}
}

// runThenRestartRenter waits for the rig's provider's offer at rn, submits
// a silver job of the demo workload running for sleep, waits until it
// runs, and restarts rn as its owner would: the start of every test of a
// renter restarting under a running job. It returns the job's ID and the
// node started again.
func runThenRestartRenter(t *testing.T, r *hostileRig, rn *Node, name, sleep string) (string, *Node) {
	t.Helper()
	waitFor(t, 30*time.Second, "the provider's offer in the renter's book", func() bool {
		_, _, ok := rn.market.Book().Get(r.prov.Host().ID().String())
		return ok
	})
	j, err := rn.renterJobs.Submit([]byte(linesSpec(name, sleep, 2)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, j.ID, 30*time.Second, "running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	return j.ID, restartNode(t, r.ctx, rn)
}
