package executor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
)

// ownedDocker is a Docker executor working for owner, as a node's is.
func ownedDocker(t *testing.T, owner Owner) *Docker {
	t.Helper()
	d := needDocker(t)
	d.SetOwner(owner)
	return d
}

// testOwner is an owner of this test alone; instance tells two instances
// of one node apart.
func testOwner(t *testing.T, node, instance string) Owner {
	t.Helper()
	return Owner{Node: fmt.Sprintf("peer-%s-%d-%s", node, os.Getpid(), t.Name()),
		Instance: fmt.Sprintf("%s-%d-%d", instance, os.Getpid(), time.Now().UnixNano())}
}

func startOn(t *testing.T, d *Docker, s Spec) Job {
	t.Helper()
	j, err := d.Start(context.Background(), s, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	return j
}

// Two processes of one identity (copies of one repo) share an engine:
// each one's Reconcile removes only what carries its own instance ID and
// its keep rejects, never the other's jobs (nor another node's), and
// reports the other's jobs instead.
func TestDockerReconcileRemovesOnlyItsOwnInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	me := testOwner(t, "a", "one")
	copyOwner := Owner{Node: me.Node, Instance: me.Instance + "-copy"}
	mine, theirs, stranger := ownedDocker(t, me), ownedDocker(t, copyOwner), ownedDocker(t, testOwner(t, "b", "other"))

	orphan, kept, copied, foreign := testSpec(t, "ignore"), testSpec(t, "ignore"), testSpec(t, "ignore"), testSpec(t, "ignore")
	for _, s := range []*Spec{&orphan, &copied} { // with a volume, its holder and a network
		s.Egress, s.CheckpointPath = true, "/ckpt"
	}
	startOn(t, mine, orphan)
	startOn(t, mine, kept)
	startOn(t, theirs, copied)
	startOn(t, stranger, foreign)

	// Everything a job has carries its owner and its lease.
	want := map[string]string{LabelNode: me.Node, LabelInstance: me.Instance, LabelLease: orphan.LeaseCID, LabelJob: orphan.JobID}
	cs := containersOf(t, mine, orphan.JobID)
	if len(cs) != 2 {
		t.Fatalf("orphan has %d containers, want the job and its volume holder", len(cs))
	}
	vol, err := mine.cli.VolumeInspect(ctx, "gleaner-ckpt-"+orphan.JobID)
	if err != nil {
		t.Fatal(err)
	}
	net, err := mine.cli.NetworkInspect(ctx, networkName(orphan.JobID), network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, labels := range map[string]map[string]string{"job": cs[0].Labels, "holder": cs[1].Labels, "volume": vol.Labels, "network": net.Labels} {
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("%s: label %s is %q, want %q", what, k, labels[k], v)
			}
		}
	}

	// keep holds kept alone: every other job on the engine is rejected,
	// and still only mine goes.
	r, err := mine.ReconcileReport(ctx, func(id string) bool { return id == kept.JobID })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Removed, []string{orphan.JobID}) || !slices.Equal(r.Kept, []string{kept.JobID}) {
		t.Fatalf("removed %v, kept %v; want removed [%s], kept [%s]", r.Removed, r.Kept, orphan.JobID, kept.JobID)
	}
	if !slices.Equal(r.Others, []OtherJob{{JobID: copied.JobID, Lease: copied.LeaseCID, Instance: copyOwner.Instance}}) {
		t.Errorf("others %+v, want the copy's job alone", r.Others)
	}
	if n := len(containersOf(t, mine, orphan.JobID)); n != 0 {
		t.Errorf("%d containers of the orphan survived", n)
	}
	if _, err := mine.cli.VolumeInspect(ctx, "gleaner-ckpt-"+orphan.JobID); !cerrdefs.IsNotFound(err) {
		t.Errorf("orphan's volume survived: %v", err)
	}
	if _, err := mine.cli.NetworkInspect(ctx, networkName(orphan.JobID), network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("orphan's network survived: %v", err)
	}
	running := func(s Spec, n int) {
		t.Helper()
		cs := containersOf(t, mine, s.JobID)
		if len(cs) != n {
			t.Fatalf("job %s has %d containers, want %d", s.JobID, len(cs), n)
		}
		for _, c := range cs {
			if c.State != "running" {
				t.Errorf("job %s: a container is %s", s.JobID, c.State)
			}
		}
	}
	running(kept, 1)
	running(copied, 2)
	running(foreign, 1)
	if _, err := mine.cli.VolumeInspect(ctx, "gleaner-ckpt-"+copied.JobID); err != nil {
		t.Errorf("the copy's volume: %v", err)
	}
	if _, err := mine.cli.NetworkInspect(ctx, networkName(copied.JobID), network.InspectOptions{}); err != nil {
		t.Errorf("the copy's network: %v", err)
	}

	// And the other way round: the copy removes its own job, not mine.
	r, err = theirs.ReconcileReport(ctx, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Removed, []string{copied.JobID}) || len(r.Kept) != 0 {
		t.Fatalf("the copy removed %v, kept %v; want removed [%s]", r.Removed, r.Kept, copied.JobID)
	}
	if !slices.Equal(r.Others, []OtherJob{{JobID: kept.JobID, Lease: kept.LeaseCID, Instance: me.Instance}}) {
		t.Errorf("the copy's others %+v, want my kept job alone", r.Others)
	}
	running(kept, 1)
	running(foreign, 1)

	// An executor nobody named an owner for owns only what it made.
	if removed, err := needDocker(t).Reconcile(ctx, func(string) bool { return false }); err != nil || len(removed) != 0 {
		t.Fatalf("an unowned executor removed %v (%v)", removed, err)
	}
	running(kept, 1)
	running(foreign, 1)
}

// A job Reconcile kept (its lease is still to run: a reservation made
// ready before a crash) is replaced when the restarted node creates it
// again, instead of its names blocking the new containers.
func TestDockerCreateReplacesAKeptLeftover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner := testOwner(t, "a", "one")
	before := ownedDocker(t, owner)
	spec := testSpec(t, "hello")
	spec.Egress, spec.CheckpointPath = true, "/ckpt"
	old, err := before.Create(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Remove(context.Background()) }) // runs last
	oldIDs := map[string]bool{}
	for _, c := range containersOf(t, before, spec.JobID) {
		oldIDs[c.ID] = true
	}

	after := ownedDocker(t, owner) // the restarted node's
	r, err := after.ReconcileReport(ctx, func(id string) bool { return id == spec.JobID })
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(r.Removed, spec.JobID) || !slices.Contains(r.Kept, spec.JobID) || len(containersOf(t, after, spec.JobID)) != 2 {
		t.Fatalf("Reconcile: removed %v, kept %v; the kept job has %d containers", r.Removed, r.Kept, len(containersOf(t, after, spec.JobID)))
	}
	j := startOn(t, after, spec)
	res, err := j.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the job started again: %+v %v", res, err)
	}
	waitForLog(t, j, "hello from gleaner")
	cs := containersOf(t, after, spec.JobID)
	if len(cs) != 2 {
		t.Fatalf("%d containers, want the new job and its holder", len(cs))
	}
	for _, c := range cs {
		if oldIDs[c.ID] {
			t.Errorf("the kept container %s is still there", c.ID)
		}
	}
}
