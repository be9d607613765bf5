package testnet

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// requireDocker fails loudly, never skips, when the engine is missing:
// these tests and benchmarks are the product's main path. It builds the
// demo image so that it is cached before anything runs or is measured.
func requireDocker(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("this needs a running Docker engine (it runs real containers): %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := BuildDemoImage(ctx, ".."); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", DemoImage).CombinedOutput(); err != nil {
		t.Fatalf("%s is not in the local image store after building it: %v: %s", DemoImage, err, out)
	}
}

func jobSpec(name, tier string, args ...string) string {
	return fmt.Sprintf(`name: %s
image: %s
command: [%s]
resources: {gpus: 1}
tier: %s
max_price: 1.00
duration: {expected: 1m, max: 10m}
allow_simulated: true
`, name, DemoImage, strings.Join(quoteAll(args), ", "), tier)
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

func waitJob(t *testing.T, cl *rpc.Client, id string, want func(string) bool, limit time.Duration) renting.JobRecord {
	t.Helper()
	return waitRecord(t, cl, id, func(j renting.JobRecord) bool { return want(j.State) }, limit)
}

// waitRecord polls a job's record until want holds.
func waitRecord(t *testing.T, cl *rpc.Client, id string, want func(renting.JobRecord) bool, limit time.Duration) renting.JobRecord {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var j renting.JobRecord
		if err := cl.Call(context.Background(), "job_status", node.JobIDParams{ID: id}, &j); err != nil {
			t.Fatal(err)
		}
		if want(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after %v (verified %q, error %q)", id, j.State, limit, j.Verified, j.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func managedContainers(t *testing.T, jobID string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=net.gleaner.managed=1", "--format", "{{.Names}} {{.Label \"net.gleaner.job\"}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	var mine []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, jobID) {
			mine = append(mine, line)
		}
	}
	return strings.Join(mine, "\n")
}

// noContainersLeft waits for the provider to remove a job's containers:
// it does so right after the job's last event (removal can take a second
// and must not hold the GPUs), so a renter may see the end first.
func noContainersLeft(t *testing.T, jobID string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := managedContainers(t, jobID)
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers left behind:\n%s", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRentAGPUEndToEnd: on a 5-node local network one provider sells a
// simulated GPU; a renter submits a job, its node runs the auction, both
// sides sign the lease, the provider runs the container in Docker and the
// renter sees its output; a second job is cancelled while it runs.
func TestRentAGPUEndToEnd(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := marketCluster(t, ctx, 5, price{"0.40", "0.70"})
	prov := c.Nodes()[0].Host().ID().String()
	provider, _ := c.Client(0)
	rc, _ := c.Client(4)
	var j renting.JobRecord
	if err := rc.Call(ctx, "job_submit", node.JobSubmitParams{Spec: jobSpec("hello", "silver", "-sleep", "500ms")}, &j); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, rc, j.ID, func(s string) bool {
		return s == renting.StateCompleted || s == renting.StateFailed || s == renting.StateNoMatch
	}, time.Minute)
	if j.State != renting.StateCompleted || j.ExitCode == nil || *j.ExitCode != 0 || j.Provider != prov || !j.Simulated {
		var ex renter.Explain
		_ = rc.Call(ctx, "job_explain", node.JobIDParams{ID: j.ID}, &ex)
		t.Fatalf("job ended %+v\nexplain: %+v", j, ex)
	}
	var logs node.JobLogsResult
	if err := rc.Call(ctx, "job_logs", node.JobIDParams{ID: j.ID}, &logs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.Logs, "hello from a gleaner job: uid 65534, simulated GPUs \"1\"") || !strings.Contains(logs.Logs, "job finished") {
		t.Fatalf("renter's logs:\n%s", logs.Logs)
	}
	var leases []node.LeaseView
	if err := provider.Call(ctx, "lease_list", nil, &leases); err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].CID != j.LeaseCID || leases[0].Active {
		t.Fatalf("provider's leases %+v; rc's lease %s", leases, j.LeaseCID)
	}
	// The lease names the GPU the provider gave, one its hardware claim
	// binds to its identity.
	l, _, err := auction.DecodeSignedLease(j.Lease, true)
	if err != nil {
		t.Fatal(err)
	}
	var ev trust.Evidence
	eventuallyT(t, 10*time.Second, "the provider's hardware claim at the rc", func() bool {
		return rc.Call(ctx, "rep_show", node.PeerParamsRep{Peer: prov}, &ev) == nil && ev.Claim != nil
	})
	if len(l.GPUUUIDHash) != 1 {
		t.Fatalf("lease GPUs %v", l.GPUUUIDHash)
	}
	if _, ok := ev.Claim.GPU(l.GPUUUIDHash[0]); !ok {
		t.Fatalf("the lease's GPU %s is not in the provider's claim %+v", l.GPUUUIDHash[0], ev.Claim)
	}
	noContainersLeft(t, j.ID)
	// Both sides journaled the lease; the rc also the outcome, and its
	// feed replicated to the provider.
	renterID := c.Nodes()[4].Host().ID().String()
	eventuallyT(t, 10*time.Second, "the rc's feed replicated to the provider", func() bool {
		var hs []node.HeadView
		_ = provider.Call(ctx, "ledger_heads", nil, &hs)
		for _, h := range hs {
			if h.Author == renterID && h.Seq >= 2 {
				return true
			}
		}
		return false
	})
	var hist []node.EntryView
	if err := rc.Call(ctx, "ledger_history", nil, &hist); err != nil || len(hist) < 2 || hist[0].Type != "outcome" || hist[1].Type != "lease" {
		t.Fatalf("renter's feed: %+v, %v", hist, err)
	}
	// The provider's settlement (carrying the rc's voucher) and the
	// rc's outcome give the provider a paid history, hence a score.
	eventuallyT(t, 15*time.Second, "the provider has a reputation", func() bool {
		var ev trust.Evidence
		return rc.Call(ctx, "rep_show", node.PeerParamsRep{Peer: prov}, &ev) == nil &&
			ev.Score != nil && *ev.Score > 0.5 && ev.Outcomes["completed"] == 1 && ev.PaidTotal > 0
	})
	var ex renter.Explain
	if err := rc.Call(ctx, "job_explain", node.JobIDParams{ID: j.ID}, &ex); err != nil || ex.Winner != prov || len(ex.Quotes) != 1 {
		t.Fatalf("explain %+v, %v", ex, err)
	}

	// Cancel stops the container and releases the GPU.
	j = submitJob(t, rc, jobSpec("long", "bronze", "-sleep", "60s", "-lines", "60"))
	waitJob(t, rc, j.ID, func(s string) bool { return s == renting.StateRunning }, time.Minute)
	if err := rc.Call(ctx, "job_cancel", node.JobIDParams{ID: j.ID}, &j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for managedContainers(t, j.ID) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("cancelled job's container still there:\n%s", managedContainers(t, j.ID))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := rc.Call(ctx, "job_submit", node.JobSubmitParams{Spec: jobSpec("after", "silver")}, &j); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, rc, j.ID, func(s string) bool {
		return s == renting.StateCompleted || s == renting.StateFailed || s == renting.StateNoMatch
	}, time.Minute)
	if j.State != renting.StateCompleted {
		t.Fatalf("a job after the cancel did not get the released GPU: %+v", j)
	}
}

func eventuallyT(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
