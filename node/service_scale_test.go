package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction/service"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// Services healed and scaled (docs/SERVICES.md, "Healing and scaling"):
// real nodes in this process, libp2p on loopback, the model server's
// real containers through Docker.

// serviceSeller is a provider of one simulated GPU that takes services.
func serviceSeller(t testing.TB, ctx context.Context) *Node {
	t.Helper()
	return serviceSellerWith(t, ctx, 0)
}

// serviceSellerWith is serviceSeller giving bronze leases notice seconds
// of notice before a preemption (0: the default settings').
func serviceSellerWith(t testing.TB, ctx context.Context, notice int64) *Node {
	t.Helper()
	n := startSellerWith(t, ctx, Options{}, func(s *offers.Settings) {
		s.Policy.Workloads = []string{"batch", "service"}
		if notice > 0 {
			s.Policy.PreemptNotice = notice
		}
	})
	id := n.Host().ID().String()
	t.Cleanup(func() { removeDockerOf(id) }) // whatever the test leaves behind
	return n
}

// removeDockerOf removes the containers of the node id, then their
// networks: a stopped node leaves its jobs for its next start to adopt,
// and Docker has address pools for about 30 networks in all.
func removeDockerOf(id string) {
	label := "label=net.gleaner.node=" + id
	for _, kind := range []string{"container", "network"} {
		ls := []string{kind, "ls", "-q", "--filter", label}
		rm := []string{kind, "rm"}
		if kind == "container" {
			ls = append(ls, "-a")
			rm = append(rm, "-f", "-v")
		}
		out, _ := exec.Command("docker", ls...).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append(rm, ids...)...).Run()
		}
	}
}

// modelService is a service of the model server with replicas replicas.
func modelService(name string, replicas int) string {
	return fmt.Sprintf("name: %s\nkind: service\nimage: %s\n"+
		"env: {MODELSERVER_LOAD_DELAY: 100ms, MODELSERVER_TOKEN_DELAY: 1ms}\n"+
		"service:\n  port: %d\n  readiness: {path: /health, period: 1s}\n  replicas: {min: %d, max: %d}\n"+
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n",
		name, modelimage.Tag, modelimage.Port, replicas, replicas)
}

// gatewayGet is one GET through a service's gateway: nil for a 200.
func gatewayGet(url string) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d from replica %q: %.300s", url, resp.StatusCode, resp.Header.Get("X-Gleaner-Replica"), body)
	}
	return nil
}

// waitService polls the service's view until cond holds.
func waitService(t testing.TB, rn *Node, name string, limit time.Duration, what string, cond func(*services.ServiceView) bool) *services.ServiceView {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		v, err := rn.renterServices.View(name, true)
		if err != nil {
			t.Fatal(err)
		}
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %+v", limit, what, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readyOn reports whether every replica of v is ready, n of them, on n
// distinct providers.
func readyOn(v *services.ServiceView, n int) bool {
	provs := map[string]bool{}
	for _, r := range v.Replicas {
		if !r.Ready || r.State != renting.StateRunning || r.Provider == "" {
			return false
		}
		provs[r.Provider] = true
	}
	return len(v.Replicas) == n && len(provs) == n
}

// service_scale 1 -> 2 -> 1 -> auto: a second replica is bought on the
// other provider and serves; scaled down, its job is cancelled and the
// first serves on; auto gives the count back to the spec's replicas.min.
func TestServiceScaleAddsAndCancelsReplicas(t *testing.T) {
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p1, p2 := serviceSeller(t, ctx), serviceSeller(t, ctx)
	rn := renterOf(t, ctx, p1, p2)
	api := serviceAPIOf(rn)
	if _, err := api.Up(ctx, services.ServiceUpParams{Spec: modelService("scaled", 1)}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "scaled", 60*time.Second, "one ready replica", func(v *services.ServiceView) bool { return readyOn(v, 1) })
	first := v.Replicas[0].Job

	if _, err := api.Scale(ctx, services.ServiceScaleParams{Name: "scaled", Replicas: 40}); err == nil {
		t.Fatal("service_scale 40: no error")
	}
	if _, err := api.Scale(ctx, services.ServiceScaleParams{Name: "nosuch", Replicas: 2}); err == nil {
		t.Fatal("service_scale of no such service: no error")
	}
	if v, err := api.Scale(ctx, services.ServiceScaleParams{Name: "scaled", Replicas: 2}); err != nil || v.Scale != 2 {
		t.Fatalf("service_scale 2: %v %+v", err, v)
	}
	v = waitService(t, rn, "scaled", 60*time.Second, "two ready replicas on two providers", func(v *services.ServiceView) bool { return readyOn(v, 2) })
	if v.Replicas[0].Job != first {
		t.Fatalf("scaling up replaced replica 0: %+v", v.Replicas)
	}
	second := v.Replicas[1].Job
	if rec, _ := rn.renterJobs.Get(second); rec.Service != "scaled" {
		t.Fatalf("the added replica's job is not the service's: %+v", rec)
	}
	url := v.URL
	get := func() error { return gatewayGet(url + "/health") }
	for range 6 {
		if err := get(); err != nil {
			t.Fatalf("GET through the gateway with two replicas: %v", err)
		}
	}

	if _, err := api.Scale(ctx, services.ServiceScaleParams{Name: "scaled", Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	waitService(t, rn, "scaled", 20*time.Second, "one replica left", func(v *services.ServiceView) bool {
		return len(v.Replicas) == 1 && v.Replicas[0].Job == first
	})
	waitFor(t, 40*time.Second, "the scaled-down job cancelled", func() bool {
		j, err := rn.renterJobs.Get(second)
		return err == nil && j.State == renting.StateCancelled
	})
	if err := get(); err != nil {
		t.Fatalf("GET through the gateway after scaling down: %v", err)
	}
	// The record is kept with the count fixed.
	var rec services.ServiceRecord
	if err := rn.store.Get(store.BucketServices, "scaled", &rec); err != nil || rec.Scale != 1 || len(rec.Replicas) != 1 {
		t.Fatalf("stored record: %v %+v", err, rec)
	}
	if v, err := api.Scale(ctx, services.ServiceScaleParams{Name: "scaled", Replicas: 0}); err != nil || v.Scale != 0 {
		t.Fatalf("service_scale auto: %v %+v", err, v)
	}
	time.Sleep(2 * service.SyncEvery)
	if v, _ := rn.renterServices.View("scaled", false); len(v.Replicas) != 1 || v.Replicas[0].Job != first {
		t.Fatalf("after auto: %+v", v.Replicas)
	}
	if _, err := api.Down(ctx, services.ServiceNameParams{Name: "scaled"}); err != nil {
		t.Fatal(err)
	}
}
