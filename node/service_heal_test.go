package node

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction/service"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// Three replicas on three of four providers; one provider is killed while
// a client sends GETs through the gateway: every GET succeeds (a replica
// that fails before answering is retried on another), and once the renter
// gives the lost provider up the replica is replaced, at its index, by a
// new job on the fourth provider. The replacement is in the stored record
// and survives the renter's restart.
func TestServiceReplicaLostWithItsProviderIsReplaced(t *testing.T) {
	// The goal is 10 s; the bound leaves room for two loaded CI cores.
	const replacedWithin = 20 * time.Second
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	provs := []*Node{serviceSeller(t, ctx), serviceSeller(t, ctx), serviceSeller(t, ctx), serviceSeller(t, ctx)}
	byID := map[string]*Node{}
	for _, p := range provs {
		byID[p.Host().ID().String()] = p
	}
	rn := renterOf(t, ctx, provs...)
	api := serviceAPIOf(rn)
	if _, err := api.Up(ctx, services.ServiceUpParams{Spec: modelService("healed", 3)}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "healed", 90*time.Second, "three ready replicas on three providers", func(v *services.ServiceView) bool { return readyOn(v, 3) })
	before := slices.Clone(v.Replicas)
	url := v.URL

	load := startLoad(1, 200*time.Millisecond, func(*http.Client) error { return gatewayGet(url + "/health") })
	stopClient := load.stop
	defer stopClient()

	lost := before[1]
	crashNode(t, byID[lost.Provider])
	crashed := time.Now()
	// A replica's lost provider is given up at once (no coming back to
	// it, replica_liveness.go): the service replaces it within seconds.
	v = waitService(t, rn, "healed", 60*time.Second, "replica 1 replaced and ready", func(v *services.ServiceView) bool {
		return len(v.Replicas) == 3 && v.Replicas[1].Job != lost.Job && readyOn(v, 3)
	})
	if took := time.Since(crashed); took > replacedWithin {
		t.Errorf("the replica was replaced and ready %v after its provider's loss, want within %v", took.Round(100*time.Millisecond), replacedWithin)
	} else {
		t.Logf("replaced and ready %v after the provider's loss", took.Round(100*time.Millisecond))
	}
	time.Sleep(time.Until(crashed.Add(6 * time.Second))) // GETs go on through and past the healing
	stopClient()
	if n := load.failed.Load(); n > 0 || load.sent.Load() < 20 {
		t.Fatalf("%d of %d GETs through the gateway failed (last: %v)", n, load.sent.Load(), load.lastErr.Load())
	}
	t.Logf("%d GETs through the gateway, none failed", load.sent.Load())
	if v.Replicas[0].Job != before[0].Job || v.Replicas[2].Job != before[2].Job {
		t.Fatalf("replicas other than the lost one changed: %+v, were %+v", v.Replicas, before)
	}
	repl := v.Replicas[1]
	for _, r := range before {
		if repl.Provider == r.Provider {
			t.Fatalf("the replacement is on %s, a provider the service used already: %+v", repl.Provider, before)
		}
	}
	if v.Replaced != 1 || repl.Note == "" || v.Heal != "" {
		t.Fatalf("replaced %d, note %q, heal error %q", v.Replaced, repl.Note, v.Heal)
	}
	if j, _ := rn.renterJobs.Get(repl.Job); j.Service != "healed" || !slices.Contains(j.Avoid, lost.Provider) {
		t.Fatalf("the replacement's job: service %q, avoid %v", j.Service, j.Avoid)
	}
	t.Logf("replica 1: %s", repl.Note)
	want := []string{v.Replicas[0].Job, v.Replicas[1].Job, v.Replicas[2].Job}

	// The renter restarts: the record it kept names the replacement.
	var alive []*Node
	for _, p := range provs {
		if p.Host().ID().String() != lost.Provider {
			alive = append(alive, p)
		}
	}
	rn = restartRenter(t, ctx, rn, alive...)
	v = waitService(t, rn, "healed", 60*time.Second, "the three replicas ready again after the renter's restart", func(v *services.ServiceView) bool {
		return v.URL == url && readyOn(v, 3)
	})
	if got := []string{v.Replicas[0].Job, v.Replicas[1].Job, v.Replicas[2].Job}; !slices.Equal(got, want) {
		t.Fatalf("after the restart the replicas are %v, want %v", got, want)
	}
	if err := gatewayGet(url + "/health"); err != nil {
		t.Fatal(err)
	}
	if _, err := serviceAPIOf(rn).Down(ctx, services.ServiceNameParams{Name: "healed"}); err != nil {
		t.Fatal(err)
	}
}

// A service whose replicas exit before they are ever ready (here: a batch
// image that ends after a second) is healed service.HealLimit times, with
// back-off, and then no more replicas are bought: service_status says why.
func TestServiceHealingStopsAfterReplicasThatNeverGetReady(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := serviceSeller(t, ctx)
	rn := renterOf(t, ctx, prov)
	spec := "name: broken\nkind: service\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"1s\", \"-lines\", \"1\"]\n" +
		"service:\n  port: 8000\n  readiness: {path: /health, period: 1s}\n  replicas: {min: 1, max: 1}\n" +
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n"
	if _, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "broken", 2*time.Minute, "healing stopped", func(v *services.ServiceView) bool { return v.Heal != "" })
	if len(v.Replicas) != 1 {
		t.Fatalf("%d replicas after healing stopped, want 1: %+v", len(v.Replicas), v)
	}
	t.Logf("heal error: %s", v.Heal)
	time.Sleep(3 * service.SyncEvery)
	if v2, _ := rn.renterServices.View("broken", false); v2.Replaced != v.Replaced || v2.Replicas[0].Job != v.Replicas[0].Job {
		t.Fatalf("a replica bought after healing stopped: %+v", v2)
	}
	// A replica no provider took never ran: replaced, not counted.
	all, ran := serviceJobs(rn, "broken")
	if ran != service.HealLimit || v.Replaced != all-1 {
		t.Fatalf("%d jobs bought, %d of them ran, %d replaced; want %d that ran and each but the first replaced", all, ran, v.Replaced, service.HealLimit)
	}
}

// serviceJobs counts the jobs bought for the service name, and of them
// those that ran (a provider took them).
func serviceJobs(rn *Node, name string) (all, ran int) {
	for _, j := range rn.renterJobs.Siblings("") {
		if j.Service == name {
			all++
			if j.State != renting.StateNoMatch {
				ran++
			}
		}
	}
	return all, ran
}

// A replica that runs but never passes its readiness check (here the
// model server's test knob) is given up once its grace has passed: its
// job is cancelled, so it is paid for no longer, and it is replaced; after
// service.HealLimit such replicas no more are bought, service_status says
// why in words that name the check, and nothing is left running on the
// provider.
func TestServiceReplicasNeverReadyAreReleased(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := serviceSeller(t, ctx)
	rn := renterOf(t, ctx, prov)
	rn.renterServices.InjectReadyGrace(2 * time.Second) // settleMax (10 min) in use
	spec := strings.Replace(modelService("stuck", 1), "env: {", "env: {MODELSERVER_TEST_NEVER_READY: \"true\", ", 1)
	if _, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "stuck", 2*time.Minute, "healing stopped", func(v *services.ServiceView) bool { return v.Heal != "" })
	t.Logf("heal error: %s", v.Heal)
	if !strings.Contains(v.Heal, fmt.Sprintf("%d replicas in a row", service.HealLimit)) || !strings.Contains(v.Heal, "readiness check (GET /health on port 8000) never passed") {
		t.Fatalf("heal error %q", v.Heal)
	}
	// A replica no provider took (the provider still freeing the last
	// one's GPU, on a loaded machine) never ran: it is replaced but not
	// counted, so exactly service.HealLimit ran.
	all, ran := serviceJobs(rn, "stuck")
	if ran != service.HealLimit || v.Replaced != all-1 {
		t.Fatalf("%d jobs bought, %d of them ran, %d replaced; want %d that ran and each but the first replaced", all, ran, v.Replaced, service.HealLimit)
	}
	var jobs []renting.JobRecord
	for _, j := range rn.renterJobs.Siblings("") {
		if j.Service == "stuck" {
			jobs = append(jobs, j)
		}
	}
	waitNothingLeft(t, 60*time.Second, "every replica's job cancelled and the provider free", func() (left string) {
		for _, j := range jobs {
			if j, err := rn.renterJobs.Get(j.ID); err != nil {
				left += fmt.Sprintf(" %v;", err)
			} else if j.State != renting.StateCancelled && j.State != renting.StateNoMatch {
				left += fmt.Sprintf(" job %s is %s;", j.ID, j.State)
			}
		}
		for _, l := range prov.providerJobs.Leases(time.Now()) {
			left += fmt.Sprintf(" the provider holds %+v;", l)
		}
		return left
	})
}

// A service up while no provider it can reach sells (every replica ends
// no-match) keeps buying replicas past service.HealLimit with no heal
// error, and serves once a provider comes: no supply is the market's
// doing, not the spec's.
func TestServiceWithoutSupplyHealsOnceAProviderComes(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := serviceSeller(t, ctx) // up, but not yet linked to the renter
	rn := renterOf(t, ctx)
	rn.renterServices.InjectHealStep(50 * time.Millisecond) // 100 ms, 200 ms... after each no-match
	if _, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: modelService("patient", 1)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "more replicas no provider took than healing's limit", func() bool {
		all, ran := serviceJobs(rn, "patient")
		return all-ran > service.HealLimit
	})
	v, err := rn.renterServices.View("patient", false)
	if err != nil {
		t.Fatal(err)
	}
	if v.Heal != "" {
		t.Fatalf("healing stopped for want of supply: %q", v.Heal)
	}
	if err := rn.Host().LibP2P().Connect(ctx, addrInfo(prov.Host())); err != nil {
		t.Fatal(err)
	}
	waitService(t, rn, "patient", 90*time.Second, "a ready replica once a provider came", func(v *services.ServiceView) bool { return readyOn(v, 1) })
	if _, err := serviceAPIOf(rn).Down(ctx, services.ServiceNameParams{Name: "patient"}); err != nil {
		t.Fatal(err)
	}
}
