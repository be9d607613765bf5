package node

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/wire"
)

// A provider killed while its jobs run (kill -9, a crash) and started
// again within the lease: real daemons in this process, libp2p on
// loopback, bbolt, Docker.

// crashNode stops n as a kill -9 would leave it: its provider journals
// and records nothing more and leaves its job containers running and
// their leases launched and unsettled (providing.SimulateCrash); the rest
// of the node then stops, closing its host, which cuts its renters'
// streams as the death of the process would.
func crashNode(t testing.TB, n *Node) {
	t.Helper()
	// What a test that fails before the next start leaves goes all the
	// same.
	node := "label=" + "net.gleaner.node=" + n.Host().ID().String()
	t.Cleanup(func() {
		for _, kind := range [][]string{{"container", "rm", "-f", "-v"}, {"volume", "rm", "-f"}, {"network", "rm"}} {
			out, _ := exec.Command("docker", kind[0], "ls", "-aq", "--filter", node).Output()
			if kind[0] != "container" {
				out, _ = exec.Command("docker", kind[0], "ls", "-q", "--filter", node).Output()
			}
			if ids := strings.Fields(string(out)); len(ids) > 0 {
				_ = exec.Command("docker", append(kind, ids...)...).Run()
			}
		}
	})
	n.providerJobs.SimulateCrash()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// startAgain starts a new node on the repository of n, which has stopped
// (or crashed), as the owner starting the daemon again.
func startAgain(t *testing.T, ctx context.Context, n *Node) *Node {
	t.Helper()
	return startAgainWith(t, ctx, n, n.cfg)
}

// startAgainWith is startAgain with the configuration cfg.
func startAgainWith(t *testing.T, ctx context.Context, n *Node, cfg repo.Config) *Node {
	t.Helper()
	m, err := New(n.repo, cfg, n.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		_ = m.Stop(sctx)
	})
	return m
}

// jobContainer is the ID and state of the container of prov's job (not
// its volume holder), "" if it has none; it fails the test if there are
// several.
func jobContainer(t *testing.T, prov *Node, job string) (id, state string) {
	t.Helper()
	want := execTag(prov.Host().ID().String()) + "-" + job
	out, err := exec.Command("docker", "ps", "-a", "--no-trunc", "--filter", "label=net.gleaner.managed=1",
		"--format", "{{.ID}} {{.Label \"net.gleaner.job\"}} {{.State}} {{.Label \"net.gleaner.role\"}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[1] == want {
			found = append(found, line)
			id, state = f[0], f[2]
		}
	}
	if len(found) > 1 {
		t.Fatalf("job %s has %d containers: %v", job, len(found), found)
	}
	return id, state
}

// settlementsOf are the settlements prov journaled for lease cid.
func settlementsOf(t *testing.T, prov *Node, cid string) []ledger.Settlement {
	t.Helper()
	var out []ledger.Settlement
	err := prov.ledger.Walk(prov.Host().ID().String(), 0, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		if e.Type != ledger.TypeSettlement {
			return nil
		}
		if s, err := ledger.DecodePayload[ledger.Settlement](e.Payload); err == nil && s.Lease == cid {
			out = append(out, *s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// providingCost is what ran costs on j's lease, uncapped.
func providingCost(t *testing.T, j *renting.JobRecord, ran time.Duration) auction.Credits {
	t.Helper()
	l, _, err := auction.DecodeSignedLease(j.Lease, true)
	if err != nil {
		t.Fatal(err)
	}
	return sched.Cost(l, ran)
}

// A silver job whose provider is killed mid-run goes on in the same
// container: the provider, started again from its repo, adopts the
// container, holds the lease again on its GPU and follows the job; the
// renter, which lost its stream, attaches again on the same lease and
// pays on. The job completes with exit 0, its lease is settled once, for
// the whole run and within the vouchers, and the GPU's next lease
// convicts nobody.
func TestAProviderKilledMidJobAdoptsItsContainer(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prov := startSellerWith(t, ctx, Options{}, nil)
	provID := prov.Host().ID().String()
	rn := renterOf(t, ctx, prov)
	j, err := rn.renterJobs.Submit([]byte(linesSpec("survivor", "24s", 12)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := waitJob(t, rn, j.ID, 60*time.Second, "two steps logged and a voucher sent", func(j *renting.JobRecord) bool {
		b, _ := rn.renterJobs.LogsOf(j.ID)
		return strings.Contains(string(b), "step 2/12 done") && j.Vouchers >= 1
	})
	id0, state := jobContainer(t, prov, j.ID)
	if id0 == "" || state != "running" {
		t.Fatalf("the job's container is %q (%s), want one running", id0, state)
	}

	crashNode(t, prov)
	if id, state := jobContainer(t, prov, j.ID); id != id0 || state != "running" {
		t.Fatalf("after the crash the job's container is %q (%s), want %s running on", id, state, id0)
	}
	prov = startAgain(t, ctx, prov)
	if st, _ := prov.providerJobs.LeaseState(j.ID); st != providing.LeaseLaunched || !prov.providerJobs.Holds(j.ID) {
		t.Fatalf("after the restart the lease is %q (held: %v), want %q and held", st, prov.providerJobs.Holds(j.ID), providing.LeaseLaunched)
	}
	if id, state := jobContainer(t, prov, j.ID); id != id0 || state != "running" {
		t.Fatalf("after the restart the job's container is %q (%s), want the adopted %s running", id, state, id0)
	}
	// A restart listens on a new port: the renter is told it, as the
	// DHT would.
	if err := rn.Host().LibP2P().Connect(ctx, addrInfo(prov.Host())); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, rn, j.ID, 90*time.Second, "completed after the provider's restart", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	if done.ExitCode == nil || *done.ExitCode != 0 || done.Attempts != 1 || done.LeaseCID != first.LeaseCID {
		t.Fatalf("completed with exit %v in %d attempts on %s, want exit 0 in one on %s", done.ExitCode, done.Attempts, done.LeaseCID, first.LeaseCID)
	}
	out, _ := rn.renterJobs.LogsOf(j.ID)
	for _, want := range []string{"step 1/12 done", "step 12/12 done", "job finished"} {
		if strings.Count(string(out), want) != 1 {
			t.Errorf("%q is not in the renter's logs once:\n%s", want, out)
		}
	}
	waitFor(t, 30*time.Second, "the adopted container removed", func() bool { id, _ := jobContainer(t, prov, j.ID); return id == "" })
	if st, _ := prov.providerJobs.LeaseState(j.ID); st != providing.LeaseEnded || prov.providerJobs.Holds(j.ID) {
		t.Errorf("after the job the lease is %q (held: %v), want %q and free", st, prov.providerJobs.Holds(j.ID), providing.LeaseEnded)
	}

	// One settlement, for the whole run, within the best voucher, which
	// is the renter's latest; the renter was told the same charge.
	ss := settlementsOf(t, prov, first.LeaseCID)
	if len(ss) != 1 {
		t.Fatalf("%d settlements of the lease, want 1: %+v", len(ss), ss)
	}
	s := ss[0]
	if s.Charged == nil || *s.Charged <= 0 || *s.Charged > s.Total || s.Total > done.Paid || s.Total <= first.Paid {
		t.Fatalf("settled %+v (charged %v) after vouchers of %d (%d before the crash), want a charge within the latest voucher",
			s, s.Charged, done.Paid, first.Paid)
	}
	t.Logf("settled: charged %d of a voucher of %d (the renter paid %d, %d before the crash)", *s.Charged, s.Total, done.Paid, first.Paid)
	if done.Charged == nil || *done.Charged != *s.Charged || done.ChargeDisputed {
		t.Errorf("the renter recorded a charge of %v (disputed: %v), the settlement %d", done.Charged, done.ChargeDisputed, *s.Charged)
	}
	// Billed from the container's start: about the job's 24 s, not only
	// what ran after the restart, and never the time twice.
	if ran := providingCost(t, done, 24*time.Second); *s.Charged < ran*2/3 || *s.Charged > ran*2 {
		t.Errorf("charged %d for a 24 s run (cost %d)", *s.Charged, ran)
	}

	// The GPU's next lease: the adopted one was the same lease, settled
	// before the next was signed, so no node reads it as the GPU leased
	// twice.
	waitFor(t, 60*time.Second, "the provider's offer without the adopted lease's booking", func() bool {
		o, _, ok := rn.market.Book().Get(provID)
		return ok && len(o.Booked) == 0
	})
	next, err := rn.renterJobs.Submit([]byte(linesSpec("next", "1s", 1)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, next.ID, 60*time.Second, "the GPU's next job completed", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	waitFor(t, 30*time.Second, "the renter's copy of the provider's feed", func() bool {
		n := 0
		_ = rn.ledger.Walk(provID, 0, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
			if e.Type == ledger.TypeSettlement {
				n++
			}
			return nil
		})
		return n >= 2
	})
	for _, n := range []*Node{rn, prov} {
		if n.rep.Convicted(provID) {
			t.Errorf("%s convicted the provider after its crash", n.Host().ID())
		}
	}
}

// A job that exits while its provider is down (killed, started again
// after the job's end) is settled at the start for the time it ran, by
// the voucher the provider kept with the lease, and its container is
// removed.
func TestAJobThatExitedWhileItsProviderWasDownIsSettledAndRemoved(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := startSellerWith(t, ctx, Options{}, nil)
	rn := renterOf(t, ctx, prov)
	j, err := rn.renterJobs.Submit([]byte(linesSpec("gone", "6s", 3)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := waitJob(t, rn, j.ID, 60*time.Second, "running and paid", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning && j.Vouchers >= 1 })
	crashNode(t, prov)
	waitFor(t, 60*time.Second, "the job's container to exit", func() bool { _, state := jobContainer(t, prov, j.ID); return state == "exited" })
	prov = startAgain(t, ctx, prov)
	if st, _ := prov.providerJobs.LeaseState(j.ID); st != providing.LeaseInterrupted || prov.providerJobs.Holds(j.ID) {
		t.Fatalf("after the restart the lease is %q (held: %v), want %q and free", st, prov.providerJobs.Holds(j.ID), providing.LeaseInterrupted)
	}
	if id, state := jobContainer(t, prov, j.ID); id != "" {
		t.Errorf("the exited job's container %s (%s) outlived the restart", id, state)
	}
	ss := settlementsOf(t, prov, first.LeaseCID)
	if len(ss) != 1 {
		t.Fatalf("%d settlements of the lease, want 1: %+v", len(ss), ss)
	}
	s := ss[0]
	cost := providingCost(t, first, 6*time.Second)
	if s.Charged == nil || s.Total != first.Paid || *s.Charged > s.Total || *s.Charged < cost/2 || *s.Charged > 2*cost {
		t.Fatalf("settled %+v (charged %v) for a 6 s run costing %d, paid %d: want about the cost, within the voucher", s, s.Charged, cost, first.Paid)
	}
}

// A reservation whose job was made ready ahead (its container created,
// not started) and whose lease cannot be held again after a crash (here
// the owner swapped the GPU while the daemon was down) leaves no
// container: the start reconciles after Restore, with what Restore holds.
func TestAReservationNotKeptAfterACrashLeavesNoContainer(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, goldProvider)
	start := time.Now().Add(10 * time.Minute).Truncate(time.Second).UTC().Format(time.RFC3339)
	spec := goldSpec("ahead", start, "1s")
	lease := r.lease("ahead", spec)
	if ev := nextEvent(t, r.start(lease, spec), "status"); ev.Type != "status" || ev.Status != "reserved" {
		t.Fatalf("the reservation did not start: %+v", ev)
	}
	waitFor(t, 60*time.Second, "its job made ready ahead", func() bool { _, state := jobContainer(t, r.prov, "ahead"); return state == "created" })
	crashNode(t, r.prov)
	if id, state := jobContainer(t, r.prov, "ahead"); state != "created" {
		t.Fatalf("the crash left the ready container %q as %q, want it created", id, state)
	}
	cfg := r.prov.cfg
	cfg.Provider.SimulateGPUs = "1xL4"
	r.prov = startAgainWith(t, r.ctx, r.prov, cfg)
	if st := r.leaseState("ahead"); st != providing.LeaseInterrupted || r.prov.providerJobs.Holds("ahead") {
		t.Fatalf("after the restart the reservation is %q (held: %v), want %q: its GPU is gone", st, r.prov.providerJobs.Holds("ahead"), providing.LeaseInterrupted)
	}
	if id, state := jobContainer(t, r.prov, "ahead"); id != "" {
		t.Errorf("the container made ready for the reservation not kept (%s, %s) outlived the restart", id, state)
	}
	if n := r.settlements(wire.LeaseCID(lease)); n != 1 {
		t.Errorf("%d settlements of the reservation not kept, want 1", n)
	}
}
