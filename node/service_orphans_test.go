package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
)

// A renter that stopped between buying a service's job and saving the
// record that holds it (here: a job bought for the service "kept", which
// its record does not list), or between deleting a record (service down)
// and cancelling its jobs (a job of the service "gone"), cancels those
// jobs when it starts again: their providers free the GPUs, and the
// service's own replica serves on.
func TestServiceJobsNoRecordHoldsAreCancelledOnRestart(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	provs := []*Node{serviceSeller(t, ctx), serviceSeller(t, ctx), serviceSeller(t, ctx)}
	rn := renterOf(t, ctx, provs...)
	if _, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: modelService("kept", 1)}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "kept", 90*time.Second, "the replica ready", func(v *services.ServiceView) bool { return readyOn(v, 1) })
	replica := v.Replicas[0].Job
	spec, err := auction.ParseJobSpec([]byte(modelService("kept", 1)))
	if err != nil {
		t.Fatal(err)
	}
	y, err := services.ReplicaSpec(spec, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for _, svc := range []string{"kept", "gone"} {
		j, err := rn.renterJobs.Submit(y, nil, renting.SubmitOptions{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, j.ID)
	}
	waitFor(t, 90*time.Second, "both orphans running", func() bool {
		for _, id := range orphans {
			if j, err := rn.renterJobs.Get(id); err != nil || j.State != renting.StateRunning {
				return false
			}
		}
		return true
	})
	leases := func() (n int) {
		for _, p := range provs {
			n += len(p.providerJobs.Leases(time.Now()))
		}
		return n
	}
	if n := leases(); n != 3 {
		t.Fatalf("the providers hold %d leases, want 3 (the replica and the two orphans)", n)
	}

	rn = restartRenter(t, ctx, rn, provs...)
	waitNothingLeft(t, 60*time.Second, "the orphans cancelled and their GPUs free", func() (left string) {
		for _, id := range orphans {
			if j, err := rn.renterJobs.Get(id); err != nil {
				left += fmt.Sprintf(" orphan %s: %v;", id, err)
			} else if j.State != renting.StateCancelled {
				left += fmt.Sprintf(" orphan %s is %s;", id, j.State)
			}
		}
		if n := leases(); n != 1 {
			left += fmt.Sprintf(" the providers hold %d leases, want 1;", n)
		}
		return left
	})
	v = waitService(t, rn, "kept", 60*time.Second, "the replica ready again", func(v *services.ServiceView) bool { return readyOn(v, 1) })
	if v.Replicas[0].Job != replica {
		t.Fatalf("the service's replica is %s, want %s, kept", v.Replicas[0].Job, replica)
	}
	if err := gatewayGet(v.URL + "/health"); err != nil {
		t.Fatal(err)
	}
}
